"""Which of the paper's items (expected/*.yaml) each planned configuration feeds, and which
items a plan leaves unjudged (no torch, no pandas: the plan's own rows).

A configuration feeds an item where the item's `rows` filter (figure, model, parallelism,
precision; the mode is every configuration's) selects it. An item is unjudged where no
configuration that runs feeds it, or where its kind needs more than one configuration
and the plan has too few: `increases_with` / `decreases_with` need two values of the
field they run along, `group_greater` a configuration on each side. An item scoped to
other GPUs (its `scope`) is fed all the same: compare judges it "not applicable" on
other hardware, and the plan cannot know the hardware.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from artifact.core.config import get_model
from artifact.estimate.model import Row
from artifact.judge.expected import ExpectedItem

# the filter keys a plan row carries; `mode` is not one: every configuration runs every mode
ROW_KEYS = ("figure", "model", "parallelism", "precision")


def _as_list(v: Any) -> list:
    return list(v) if isinstance(v, list | tuple) else [v]


def _selects(filters: dict[str, Any], row: Row) -> bool:
    return all(getattr(row, k) in _as_list(filters[k]) for k in ROW_KEYS if k in filters)


def feeds(row: Row, item: ExpectedItem[str, Any]) -> bool:
    """Whether a configuration that runs is one of the item's rows."""
    return bool(row.runs) and row.fits is not None and _selects(item.rows, row)


def _along(row: Row, field: str) -> Any:
    if field == "params":  # the models' parameter counts (compare reads them from configs)
        return get_model(row.model).params
    return getattr(row, field, None)


def why_unjudged(item: ExpectedItem[str, Any], rows: Iterable[Row]) -> str | None:
    """Why the plan's configurations cannot judge `item` (None: they can)."""
    rows = list(rows)
    fed = [r for r in rows if feeds(r, item)]
    if not fed:
        # a figure recorded "not run" says why (fig9: --allow-power-cap)
        figures = _as_list(item.rows.get("figure", []))
        notes = [r.note for r in rows if r.figure in figures and r.note.startswith("not run")]
        return notes[0] if notes else "no configuration of this plan feeds it"
    kind = item.kind
    monotone = kind in ("increases_with", "decreases_with")
    if monotone and len({_along(r, item.along) for r in fed}) < 2:
        return f"it needs configurations with at least two values of {item.along}"
    if kind == "group_greater":
        for side in ("greater", "lesser"):
            if not any(_selects(getattr(item, side), r) for r in fed):
                sides = ", ".join(f"{k} {v}" for k, v in getattr(item, side).items())
                return f"it needs a configuration with {sides}"
    return None


def fed_items(rows: list[Row], items: list[ExpectedItem]) -> list[list[str]]:
    """For each row, the ids of the items it feeds (in expected/'s order)."""
    return [[i.id for i in items if feeds(r, i)] for r in rows]


def unjudged(rows: list[Row], items: list[ExpectedItem]) -> dict[str, str]:
    """item id -> why the plan leaves it unjudged."""
    out = {}
    for item in items:
        why = why_unjudged(item, rows)
        if why:
            out[item.id] = why
    return out


CPU_NOTE = "a CPU functional check: no claim of the paper is evaluated on a CPU"
ONE_GPU_NOTE = (
    "one GPU: its collectives move no data, and the paper's items need ranks exchanging data"
)
EMULATED_NOTE = "emulated: a preview beside the paper's numbers, never counted"


def not_applicable_here(
    rows: list[Row], items: list[ExpectedItem], device: str, emulated: bool
) -> dict[str, str]:
    """item id -> why the report will not count it on this hardware, among the items the
    plan's configurations can judge: compare decides the same from the records (a CPU
    judges nothing; emulated rows, those of more than one GPU in an emulated plan, are a
    preview; rows of one GPU judge nothing that needs communication)."""
    from artifact.judge.expected import NEEDS_COMMUNICATION, metric_of

    out = {}
    for item in items:
        if why_unjudged(item, rows) is not None:
            continue
        if device == "cpu":
            out[item.id] = CPU_NOTE
            continue
        counted = [r for r in rows if feeds(r, item) and not (emulated and r.gpus > 1)]
        if not counted:
            out[item.id] = EMULATED_NOTE
        elif max(r.gpus for r in counted) < item.needs.get("world", 1):
            out[item.id] = ONE_GPU_NOTE  # its scope (expected/ needs), as compare reads it
        elif all(r.gpus == 1 for r in counted) and metric_of(item) in NEEDS_COMMUNICATION:
            out[item.id] = ONE_GPU_NOTE
    return out
