"""Coverage of an item that speaks of a whole grid ("18.9 % on average over all models",
"at most 40 %"): how many of the paper's configurations the rows judged cover, and the
selection-aware interval of a maximum over configurations (docs/measurement.md,
"Grid-wide items").

An item names its grid in expected/ (`grid: [model, parallelism]`): the dimensions it
speaks of. The grid is the paper preset's sweep of the item's figure (the configurations
`plan --preset paper` lists: FigureSpec.configs), restricted to the
item's rows' filters. The GPU generation is not a dimension one run can cover: the
item's tolerance stands for it (its tolerance_why says how).
"""

from __future__ import annotations

import math

import pandas as pd
from scipy import stats

from artifact.core.config import get_preset
from artifact.figures import spec_of
from artifact.judge.expected import ExpectedItem


def _as_list(v) -> list:
    return v if isinstance(v, list) else [v]


def paper_grid(item: ExpectedItem) -> set[tuple]:
    """The grid's points (one tuple of the item's `grid` dimensions each) of the paper
    preset's sweep of the item's figure, within the item's row filters."""
    dims = item.grid
    figure = spec_of(item.rows.get("figure", item.file_figure)).records
    keys = ("model", "parallelism", "micro_batch", "precision")
    points = [
        {k: getattr(p, k) for k in keys} for p in spec_of(figure).configs(get_preset("paper"))
    ]
    filters = {
        k: _as_list(v) for k, v in item.rows.items() if k in ("model", "parallelism", "micro_batch")
    }
    kept = [p for p in points if all(p[k] in want for k, want in filters.items())]
    return {tuple(p[d] for d in dims) for p in kept}


def coverage(item: ExpectedItem, rows: pd.DataFrame, configs: dict) -> tuple[int, int] | None:
    """(k, K): the grid points the rows cover, of the grid's; None for an item with no grid."""
    if not item.grid:
        return None
    grid = paper_grid(item)
    seen = {tuple(configs.get(c, {}).get(d) for d in item.grid) for c in rows["config_id"]}
    return len(seen & grid), len(grid)


def coverage_text(k: int, big_k: int, dims: list[str]) -> str:
    return f"{k} of {big_k} configurations of the paper's grid ({' x '.join(dims)})"


def sidak_max(rows: pd.DataFrame) -> tuple[float, float, float]:
    """The largest of the rows' means, with a 95 % interval for the largest true mean that
    accounts for picking it: every row's CI widened to the Sidak level 0.95^(1/k) (so the k
    intervals hold together with 95 % probability), then the maximum of their lower ends
    and of their upper ends. Widened by the ratio of t quantiles at the row's n, about its
    mean; one row: its own CI. NaN where a row has no CI."""
    top = float(rows["mean"].max())
    k = len(rows)
    if k == 1:
        r = rows.iloc[0]
        return top, float(r["ci_low"]), float(r["ci_high"])
    n = rows["n"].astype(float)
    if (n < 2).any() or rows[["ci_low", "ci_high"]].isna().any().any():
        return top, math.nan, math.nan
    level = 0.95 ** (1 / k)
    widen = stats.t.ppf((1 + level) / 2, n - 1) / stats.t.ppf(0.975, n - 1)
    low = rows["mean"] - (rows["mean"] - rows["ci_low"]) * widen
    high = rows["mean"] + (rows["ci_high"] - rows["mean"]) * widen
    return top, float(low.max()), float(high.max())
