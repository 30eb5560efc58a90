"""Adaptive repetitions in the run loop (`run --adaptive`; docs/measurement.md, "Adaptive
repetitions"): what rank 0 decides once a configuration's pilot is on disk.

The pilot is the configuration's first 5 repetitions (stopping.MIN_REPETITIONS). Its
records are summarised as summarize does (aggregate.summarize), and every item of
expected/ whose `rows` select the configuration (figure, model, parallelism, precision,
as compare does: expected.select) gives its quantity's CI half-width at n = 5 and its tolerance
(the smallest of its metric's numbers: stopping.item_tolerance). stopping.decide
then fixes the repetitions, 5 to the preset's (the run's --reps) maximum. The decision is
written to records/<figure>/<config-id>/stopping.json (RunStore.write_stopping); the loop
(runner.pending) broadcasts it and runs it. No torch here: the tests decide from
hand-made records.
"""

from __future__ import annotations

import math
import os
from typing import Any

from artifact.analyze import stopping
from artifact.judge.expected import ExpectedItem

PILOT = stopping.MIN_REPETITIONS
RULE = (
    "Stein's two-stage rule: N from the pilot of 5 repetitions, decided once "
    "(artifact.analyze.stopping; docs/measurement.md, 'Adaptive repetitions')"
)
NOT_JUDGED = "no item of expected/ is judged from it"
ALONE = stopping.ALONE
# A test seam: every item's tolerance replaced by this number, so a test forces a narrow
# (large tolerance) or a noisy (tiny tolerance) decision whatever the CPU's noise.
TOLERANCE_ENV = "ARTIFACT_STOPPING_TOLERANCE"


def _tolerance(item: ExpectedItem[str, Any], items: list[ExpectedItem]) -> float | None:
    seam = os.environ.get(TOLERANCE_ENV)
    return float(seam) if seam else stopping.item_tolerance(item, items)


def pilot_of(
    records: list[dict[str, Any]], figure: str, items: list[ExpectedItem]
) -> tuple[bool, dict[str, tuple[float, float]], dict[str, list[str]]]:
    """(whether any item is judged from these records' configuration, quantity -> (pilot
    CI half-width, tolerance), quantity -> the modes of its rows). A quantity is a metric;
    several items on one metric give it their widest half-width and smallest tolerance."""
    from artifact.analyze.aggregate import summarize
    from artifact.figures import spec_of
    from artifact.judge.expected import for_gpus, metric_of, select

    summary = summarize(records, {figure: spec_of(figure).derived})
    gpu = next((r["provenance"].get("gpu_model") for r in records if r.get("provenance")), None)
    fed, pilot, modes = False, {}, {}
    for item in items:
        if gpu and not for_gpus(item, [gpu]):  # compare will call it "not applicable"
            continue  # (records that name no GPU, hand-made or a CPU's, keep every item)
        about = {k: v for k, v in item.rows.items() if k != "mode"}
        if select(summary, about, None).empty:
            continue
        fed = True
        metric, tol = metric_of(item), _tolerance(item, items)
        rows = select(summary, item.rows, metric)
        if tol is None or rows.empty:
            continue
        half = ((rows["ci_high"] - rows["ci_low"]) / 2).max()  # NaN only where every CI is
        hw0, tol0 = pilot.get(metric, (-math.inf, math.inf))
        pilot[metric] = (
            max(hw0, float(half)) if not math.isnan(half) else math.nan,
            min(tol0, tol),
        )
        modes[metric] = sorted(set(modes.get(metric, [])) | set(rows["mode"]))
    return fed, pilot, modes


def _alone(records: list[dict[str, Any]]) -> bool:
    """World size 1 and not emulated: collectives move nothing, so compare judges no
    item of expected/ from the configuration (its controls and V1 need no more)."""
    return bool(records) and all(
        r.get("config", {}).get("world_size") == 1 and not r["config"].get("emulated_world")
        for r in records
    )


def decide(
    records: list[dict[str, Any]],
    figure: str,
    max_reps: int,
    items: list[ExpectedItem] | None = None,
) -> dict[str, Any]:
    """The decision stopping.json holds: n, max, why, pilot {quantity: [half-width,
    tolerance]}, modes {quantity: [mode, ...]} (where summarize applies Stein's floor)
    and the rule. `records`: the pilot's (repetitions 0-4); `items`: expected/'s."""
    if max_reps <= PILOT:  # nothing to decide: the pilot is the whole run
        n, why = stopping.decide({}, max_reps)
        return _decision(n, max_reps, why, {}, {})
    if items is None:
        from artifact.judge.expected import load_expected

        items = load_expected()
    pilot_records = [r for r in records if r["rep"] < PILOT]
    if _alone(pilot_records):
        return _decision(PILOT, max_reps, ALONE, {}, {})
    fed, pilot, modes = pilot_of(pilot_records, figure, items)
    n, why = stopping.decide(pilot, max_reps) if fed else (PILOT, NOT_JUDGED)
    return _decision(n, max_reps, why, pilot, modes)


def _decision(n: int, max_reps: int, why: str, pilot: dict, modes: dict) -> dict[str, Any]:
    return {
        "n": int(n),
        "max": int(max_reps),
        "why": why,
        "pilot": {q: [hw, tol] for q, (hw, tol) in pilot.items()},
        "modes": modes,
        "rule": RULE,
    }


def shown(decision: dict[str, Any]) -> str:
    """'5 of 25 repetitions: slowdown sets it: ...' (status/ and the report)."""
    return f"{decision['n']} of {decision['max']} repetitions: {decision['why']}"
