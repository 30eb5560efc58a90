"""The plan with the stopping rule (artifact.analyze.stopping): each configuration priced
at the repetitions the rule would give it, the pilot's spread taken from one H200's quick
run (artifact/data/reference.json 'pilot_half_width'). `plan --adaptive` prices what
`run --adaptive` runs (artifact.rank.adaptive decides from the run's own pilot;
docs/measurement.md, "Adaptive repetitions")."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from artifact.analyze import stopping
from artifact.core.config import Preset
from artifact.estimate import reference as ref
from artifact.estimate.model import Row
from artifact.judge.expected import ExpectedItem

METHOD = (
    "repetitions by the stopping rule (docs/measurement.md, 'Adaptive repetitions'; what "
    "`run --adaptive` runs, priced before its pilot): each configuration's N = the largest "
    "of its quantities' "
    "Stein sizes, ceil((t(0.975, 4) x s / (tolerance / 4))^2), 5 to the preset's {reps} "
    "(a claim's tolerance: the smallest of the numbers over its metric), "
    "s from the n = 5 CI half-widths one H200 measured ({run}) for the same parallelism, "
    "precision and metric at quick's settings; a quantity without such a pilot is not "
    "priced (none: the preset's maximum); a configuration no item is judged from: 5; "
    "time = the row's time less (repetitions - N) x its cost of one repetition; on one GPU "
    "(not emulated) every configuration stops at 5: no data moves, so no item is judged"
)


def method_text(preset: Preset) -> str:
    return METHOD.format(reps=preset.reps, run=ref.source("pilot_half_width"))


def expected_reps(row: Row, items: list[ExpectedItem], max_reps: int) -> tuple[int, str]:
    """(N, why) for one configuration: the smallest tolerance per metric of the items it
    feeds, against the pilot half-width of its parallelism/precision/metric."""
    pilots = ref.values("pilot_half_width")
    pilot: dict[str, tuple[float, float]] = {}
    for item in items:
        tol = stopping.item_tolerance(item, items) if item.id in row.feeds else None
        if tol is None:
            continue
        hw = pilots.get(f"{row.parallelism}/{row.precision}/{item.metric}")
        if hw is not None and (item.metric not in pilot or tol < pilot[item.metric][1]):
            pilot[item.metric] = (hw, tol)
    return stopping.decide(pilot, max_reps)


def apply(
    preset: Preset, rows: list[Row], build: Callable[[Preset], list[Row]], items: list[ExpectedItem]
) -> list[Row]:
    """Rows re-priced at the rule's repetitions. One repetition's cost of each row is
    the difference from the same plan at one repetition fewer (`build`)."""
    fewer = build(dataclasses.replace(preset, reps=preset.reps - 1))
    out = []
    for r, f in zip(rows, fewer, strict=True):
        per_rep = r.time_s_if_run - f.time_s_if_run
        if per_rep <= 0:  # its repetitions are not the preset's (contention, V2)
            out.append(r)
            continue
        if r.gpus == 1:  # nothing moves (an emulated row has W): no item is judged from it
            n, why = stopping.MIN_REPETITIONS, stopping.ALONE
        elif r.feeds:
            n, why = expected_reps(r, items, preset.reps)
        else:  # drawn in a figure, judged by no item: nothing to wait for
            n, why = stopping.MIN_REPETITIONS, "no item of expected/ is judged from it"
        saved = (preset.reps - n) * per_rep
        note = f"{n} of {preset.reps} repetitions by the stopping rule: {why}"
        out.append(
            dataclasses.replace(
                r,
                time_s=max(0.0, r.time_s - saved) if r.time_s else 0.0,
                time_s_if_run=r.time_s_if_run - saved,
                note="; ".join(x for x in (r.note, note) if x),
            )
        )
    return out
