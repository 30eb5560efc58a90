"""Whether a figure ran, from its status file and its rows in summary.csv: one answer for
the report's "What ran" and for compare's "not run" verdicts."""

from __future__ import annotations

import pandas as pd

from artifact.figures import spec_of


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
