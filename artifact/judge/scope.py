"""What evidence can speak to an item of expected/ (its `needs`), and why a run's cannot.

Every number of the paper comes from 4-GPU runs, so each item needs ranks that exchange
data (`world`); some need large models (`min_params_b`). A run whose rows cannot speak to
an item says so instead of judging it: "not applicable" where the hardware cannot (too
few ranks), "not run" where another preset would (a model it lacks), each naming what is
missing and what the run has. Judges nothing itself; compare asks here first.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from artifact.core.config import MODELS
from artifact.judge.expected import ExpectedItem
from artifact.results import Results

# the row filters whose values a run may lack (a preset's choice, not the hardware's)
_DIMENSIONS = ("model", "parallelism", "precision")


def _as_list(v: Any) -> list:
    return list(v) if isinstance(v, list | tuple) else [v]


def _rows(item: ExpectedItem, run: Results) -> pd.DataFrame:
    rows = run.paper_rows
    return rows[rows["figure"].isin(item.figures)]


def world_of(rows: pd.DataFrame, run: Results) -> int:
    """The most ranks any of the rows' configurations ran (1 where none says)."""
    worlds = [int(run.configs.get(c, {}).get("world_size") or 1) for c in set(rows["config_id"])]
    return max(worlds, default=1)


def _params_b(model: str) -> float:
    return MODELS[model].params / 1e9 if model in MODELS else float("nan")


def out_of_scope(item: ExpectedItem, run: Results) -> tuple[str, str] | None:
    """(verdict, reason) where the run's rows cannot speak to the item; None where they can
    (or where the item's figures have no rows at all: compare says why they did not run)."""
    needs = item.needs or {}
    rows = _rows(item, run)
    if rows.empty:
        return None
    world = world_of(rows, run)
    if world < needs.get("world", 1):
        figs = ", ".join(item.figures)
        return (
            "not applicable",
            f"needs {needs['world']} or more ranks exchanging data (the paper's runs had 4 "
            f"GPUs); this run's {figs} ran {world} rank{'s' if world > 1 else ''}",
        )
    least = needs.get("min_params_b")
    if least:
        models = sorted({str(m) for m in rows["model"].dropna()})
        if not any(_params_b(m) >= least for m in models):
            return (
                "not run",
                f"needs a model of {least:g}B parameters or more (the paper's 'large models'); "
                f"this run has {', '.join(models) or 'no model'}",
            )
    return None


def missing_configuration(item: ExpectedItem, run: Results) -> str | None:
    """Why the item's row filters select nothing, by the value this run lacks ('needs model
    gpt3-13b or llama2-13b; this run has gpt3-1.3b'); None where each filter is met."""
    rows = _rows(item, run)
    if rows.empty:
        return None
    for dim in _DIMENSIONS:
        wanted = item.rows.get(dim)
        if wanted is None or dim not in rows:
            continue
        wanted = [str(w) for w in _as_list(wanted)]
        have = sorted({str(v) for v in rows[dim].dropna()})
        if not set(wanted) & set(have):
            return f"needs {dim} {' or '.join(wanted)}; this run has {', '.join(have) or 'none'}"
    return None
