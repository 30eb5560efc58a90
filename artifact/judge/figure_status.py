"""Whether a figure ran, from its status file and its rows in summary.csv: one answer for
the report's "What ran" and for compare's "not run" verdicts; and an item's state on a
CPU run, one answer for compare and for the plan (which knows its figures from its rows)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pandas as pd

from artifact.figures import spec_of
from artifact.judge.expected import ExpectedItem


def figure_status(fig: str, status: dict, summary: pd.DataFrame) -> tuple[str, str]:
    """(category, detail) of a figure: 'ran', 'ran partly', 'not run' or 'failed'.

    'failed' covers a crash, an interruption and a run killed before it finished (its
    status still says 'running'); 'not run' is a figure the machine cannot run or an
    opt-in one; 'ran partly' names the configurations the device could not run."""
    src = spec_of(fig).records
    st = status.get(src)
    has_rows = not summary[summary["figure"] == src].empty
    if st is None:
        return ("ran", "") if has_rows else ("not run", "no records in this folder")
    if st["status"] == "running":
        return "failed", "interrupted: the run stopped before it finished"
    if st["status"] in ("failed", "not run"):
        return st["status"], st["reason"]
    skipped = st.get("configs", {})
    if skipped:
        reasons = sorted({c["reason"] for c in skipped.values()})
        return "ran partly", f"{len(skipped)} configuration(s) not run: {'; '.join(reasons)}"
    return ("ran", "") if has_rows else ("not run", "no records in this folder")


CPU_REASON = "CPU functional check: no claim of the paper is evaluated on a CPU."


def label(figure: str) -> str:
    """fig6 -> 'Fig. 6' (the paper's way); contention, v2 as they are."""
    number = figure.removeprefix("fig")
    return f"Fig. {number}" if number.isdigit() else figure


def not_ran(figures: list[str], category: Callable[[str], tuple[str, str]]) -> str:
    """Why those of `figures` that did not run did not ('' if all ran): 'Fig. 9: why'."""
    why = [(f, category(f)) for f in figures]
    return "; ".join(f"{label(f)}: {d}" for f, (cat, d) in why if not cat.startswith("ran"))


def on_a_cpu(
    item: ExpectedItem[str, Any], category: Callable[[str], tuple[str, str]]
) -> tuple[str, str]:
    """(state, why) of a paper item on a CPU run: 'not run' where a figure it reads did
    not run (what a reviewer would rerun), else 'not applicable' (a CPU judges nothing).
    `category(figure)` is figure_status's (category, detail): compare reads the run's
    status files, the plan its own rows; both call this, so they say the same."""
    stopped = not_ran(item.figures, category)
    return ("not run", stopped) if stopped else ("not applicable", CPU_REASON)
