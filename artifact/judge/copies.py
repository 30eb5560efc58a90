"""Readings copied from one figure to another (FigureSpec.reuses: fig8's rows are fig6's
records, fig10's FP16 row is fig4's FSDP row, fig11's FP32 row is fig10's), so that every
tally counts a reading once (docs/design.md section 5, verdicts.csv's `counted_in`).

A figure's configuration is a copy where the figure it reuses holds the same
configuration with the same measured rows (every mode, metric, mean and n equal): the
records were copied (artifact/rank/reuse.py), not measured again. Measured anew (the
other figure ran later, or alone), it is a reading of its own and counts.
"""

from __future__ import annotations

import math
import re

import pandas as pd

from artifact.figures import REGISTRY


def _measured(summary: pd.DataFrame) -> dict[tuple[str, str], dict[tuple[str, str], tuple]]:
    rows = summary[summary["mode"] != "derived"]
    out: dict[tuple[str, str], dict[tuple[str, str], tuple]] = {}
    for r in rows.itertuples():
        out.setdefault((r.figure, r.config_id), {})[(r.mode, r.metric)] = (r.mean, r.n)
    return out


def _same(copy: dict, source: dict) -> bool:
    """Every measured row of `copy` equals the source's (NaN equal to NaN)."""

    def eq(a, b) -> bool:
        return (a == b) or (
            isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b)
        )

    return bool(copy) and all(
        key in source and all(eq(x, y) for x, y in zip(value, source[key], strict=True))
        for key, value in copy.items()
    )


def sources(summary: pd.DataFrame) -> dict[tuple[str, str], str]:
    """(figure, config id) -> the figure whose records they are, for every copied
    configuration, followed to the figure that measured it (fig11's FP32 -> fig10)."""
    measured = _measured(summary)
    direct = {}
    for (figure, config_id), rows in measured.items():
        spec = REGISTRY.get(figure)
        source = spec.reuses if spec else None
        if source and _same(rows, measured.get((source, config_id), {})):
            direct[(figure, config_id)] = source
    out = {}
    for key, source in direct.items():
        seen = {key[0]}
        while (source, key[1]) in direct and source not in seen:  # a chain: fig11 -> fig10 -> fig4
            seen.add(source)
            source = direct[(source, key[1])]
        out[key] = source
    return out


def root(figure: str, config_id: str, copied: dict[tuple[str, str], str]) -> str:
    """The figure whose records (figure, config id) holds."""
    return copied.get((figure, config_id), figure)


# how a copied record's note says so (artifact/rank/reuse.py), and the report's words for it
_COPIED = re.compile(r"measured for (fig\d+) \(the same configuration\): its records")


def label(figure: str) -> str:
    """fig6 -> 'Fig. 6' (the paper's way); contention, v2 as they are."""
    number = figure.removeprefix("fig")
    return f"Fig. {number}" if number.isdigit() else figure


def plain_note(note: str) -> str:
    """A configuration's note with a copy's marker in plain words: 'measured for fig6 (the
    same configuration): its records' -> 'same records as Fig. 6 (copied, not measured again)'."""
    return _COPIED.sub(
        lambda m: f"same records as {label(m.group(1))} (copied, not measured again)", str(note)
    )


def without_copy_note(note: str) -> str:
    """A configuration's note without the copy's marker: configs.json keeps one note per
    configuration id, whichever figure wrote it last, so compare says `same_records_as`
    per figure instead."""
    parts = [p for p in str(note).split("; ") if not _COPIED.fullmatch(p)]
    return "; ".join(parts)
