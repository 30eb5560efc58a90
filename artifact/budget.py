"""`all --budget 6h`: which figures a time budget keeps, by the plan (no torch).

A figure's worth is the number of the paper's items (expected/*.yaml) its configurations
feed that no figure kept before it feeds, per planned hour. Figures are kept in order of
that worth, while the plan's time of those kept fits the budget; the others are left
out, and `all` records each as "not run" with the reason (status/<figure>.json), which
the report lists. Figures run in the registry's order all the same (fig10 copies fig4's
rows, fig11 fig10's, fig8 fig6's), each priced alone, without the rows it could copy.
The granularity is the figure: a budget does not split one figure's configurations.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import TYPE_CHECKING

from artifact.core.errors import ArtifactError

if TYPE_CHECKING:
    from artifact.plan import PlanQuery

UNITS = {"s": 1, "m": 60, "min": 60, "h": 3600}
FORMS = "a number with s, m or h: 90m, 6h, 1.5h"


def flag_value(args: list[str], flag: str) -> str | None:
    """The value after `flag` in `args` (None: absent, or last)."""
    return args[args.index(flag) + 1] if flag in args and args.index(flag) + 1 < len(args) else None


def parse(text: str) -> float:
    """'6h' -> 21600 seconds; a bad value is a one-line error naming it and the forms."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(s|m|min|h)\s*", text or "")
    if not m or float(m.group(1)) <= 0:
        raise ArtifactError(f"--budget {text!r}; accepted: {FORMS}")
    return float(m.group(1)) * UNITS[m.group(2)]


def pop(args: list[str]) -> tuple[list[str], float | None]:
    """(the other flags, the budget in seconds or None) from `all`'s flags."""
    args = list(args)
    if "--budget" not in args:
        return args, None
    i = args.index("--budget")
    if i + 1 >= len(args):
        raise ArtifactError(f"--budget needs a value; accepted: {FORMS}")
    value = args[i + 1]
    del args[i : i + 2]
    return args, parse(value)


def select(query: PlanQuery, budget_s: float) -> tuple[list[str], dict[str, str]]:
    """(figures kept, {figure left out: why}) for `all` of `query` on this machine."""
    from artifact import plan
    from artifact.core.units import duration

    # every figure at the query's preset and world, priced without --emulate-world
    known = plan.PlanQuery(
        preset=query.preset, gpus=query.gpus, ranks_per_gpu=query.ranks_per_gpu, nproc=query.nproc
    )
    rows = plan.plan(known)[2]
    figures = list(dict.fromkeys(r.figure for r in rows))
    # each figure priced alone: the rows it copies from another (fig10's from fig4) cost
    # their full time where that other figure is left out
    alone = {f: plan.plan(dataclasses.replace(known, figures=(f,)))[2] for f in figures}
    hours = {f: sum(r.time_s for r in alone[f]) / 3600 for f in figures}
    fed = {f: {i for r in rows if r.figure == f for i in r.feeds} for f in figures}
    kept: list[str] = []
    left: dict[str, str] = {}
    judged: set[str] = set()
    spent = 0.0
    todo = list(figures)
    while todo:  # greedy: the most new items per hour first (ties: the registry's order)
        best = max(todo, key=lambda f: len(fed[f] - judged) / max(hours[f], 1e-3))
        todo.remove(best)
        if spent + hours[best] * 3600 <= budget_s:
            kept.append(best)
            spent += hours[best] * 3600
            judged |= fed[best]
        else:
            new = len(fed[best] - judged)
            left[best] = (
                f"left out by --budget {duration(budget_s)}: the plan prices it at "
                f"{duration(hours[best] * 3600)}, {duration(budget_s - spent)} of the budget "
                f"was left; it would feed {new} more of the paper's items"
            )
    return [f for f in figures if f in kept], left


def plan_rows(query: PlanQuery) -> list | None:
    """The rows the plan of `query` builds; None where it cannot draw them (`all` goes on
    without them, as after its plan stage's error)."""
    from artifact import plan

    try:
        return plan.plan(query)[2]
    except ArtifactError:
        return None


def decided_not_run(query: PlanQuery) -> dict[str, str]:
    """{figure: why} of the figures the plan runs nothing of here for a reason of the preset
    and world alone (figures.sweeps.REFUSED_HERE: Figs. 10-11 at quick on one GPU)."""
    from artifact.estimate import model

    rows = plan_rows(query) or []
    return {
        f: next(r.note for r in rows if r.figure == f and r.method == "not run")
        for f in dict.fromkeys(r.figure for r in rows)
        if model.decided_not_run(f, rows)
    }


def disk_left(query: PlanQuery, out: Path, figures: set[str] | None = None) -> int | None:
    """Bytes the plan of `query` still has to write into `out`: its disk estimate
    (records and repetition 0's traces) of `figures` (None: all), less what their records
    and traces already hold there. None where the plan cannot price it."""
    rows = plan_rows(query)
    return None if rows is None else unwritten(rows, out, figures)


def unwritten(rows: list, out: Path, figures: set[str] | None = None) -> int:
    """Bytes the plan's `rows` of `figures` (None: all) write (records and repetition 0's
    traces), less what their records and traces already hold in `out`."""
    rows = [r for r in rows if figures is None or r.figure in figures]
    held = 0
    for fig in {r.figure for r in rows}:
        for d in (Path(out) / "records" / fig, Path(out) / "traces" / fig):
            held += sum(f.stat().st_size for f in d.rglob("*") if f.is_file())
    return max(0, sum(r.records_bytes + r.traces_bytes for r in rows) - held)
