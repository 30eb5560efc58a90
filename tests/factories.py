"""Test data built through the artifact's own types, so a test's record has the shape
RunStore.write_record writes (artifact/store.py's Record) and follows it when it changes."""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from artifact.judge.expected import ExpectedItem
from artifact.judge.verdicts import Verdict
from artifact.store import Record

_TYPED = {f.name for f in fields(Record)} - {"extra"}


def record(
    figure: str = "fig8",
    config_id: str = "c",
    mode: str = "overlap",
    rep: int = 0,
    *,
    config: dict[str, Any] | None = None,
    metrics: dict[str, Any] | None = None,
    units: dict[str, str] | None = None,
    provenance: dict[str, Any] | None = None,
    **more: Any,
) -> dict[str, Any]:
    """A valid record dict: Record(...).to_json() with empty config, metrics and provenance,
    each metric's unit "ms" unless `units` says, and schema 1. `more` sets Record's optional
    fields (per_rank, timed, reused_from, ...); any other key, or a None, goes in as written."""
    metrics = {} if metrics is None else metrics
    typed = {k: v for k, v in more.items() if k in _TYPED and v is not None}
    return Record(
        figure=figure,
        config_id=config_id,
        mode=mode,
        rep=rep,
        config={} if config is None else config,
        metrics=metrics,
        units={k: "ms" for k in metrics} if units is None else units,
        provenance={} if provenance is None else provenance,
        **typed,
        extra={k: v for k, v in more.items() if k not in typed},  # a None stays, as written
    ).to_json()


def verdict(figure: str = "fig8", item: str = "i", **fields: Any) -> Verdict:
    """A verdict row (one line of verdicts.csv) with `fields` set and the rest empty."""
    return Verdict(figure=figure, item=item, **fields)


def expected_item(
    id: str = "i", section: str = "claims", file_figure: str = "fig8", **fields: Any
) -> ExpectedItem:
    """An item of expected/ (a claim unless `section` says "numbers") with `fields` set,
    matching every row of its figure and measured on any GPU."""
    fields = {"statement": "s", "rows": {}, "source": {}, "scope": "any", **fields}
    return ExpectedItem(id=id, section=section, file_figure=file_figure, **fields)
