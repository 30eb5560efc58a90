"""The figure registry: every experiment of the artifact, one declarative file each.

    from artifact.figures import spec_of, REGISTRY
    spec_of("fig8").derived      # what summary.csv derives for it
    spec_of("fig5").records      # "fig4": drawn from fig4's records

Importing this package imports no torch (summarize, compare, plan and the report use it).
"""

from __future__ import annotations

import importlib

from artifact.core.errors import bad_choice
from artifact.figures.names import figure_names
from artifact.figures.spec import FigureSpec, Panel, Series

REGISTRY: dict[str, FigureSpec] = {
    name: importlib.import_module(f"artifact.figures.{name}").SPEC for name in figure_names()
}
ALL: tuple[str, ...] = tuple(REGISTRY)
PAPER_FIGURES: tuple[str, ...] = tuple(n for n, s in REGISTRY.items() if s.in_paper)
# what `nox -s all` runs: every figure but those drawn from another's records
OWN_RECORDS: tuple[str, ...] = tuple(n for n, s in REGISTRY.items() if s.records_of is None)


def spec_of(name: str) -> FigureSpec:
    """The figure's spec; an unknown name is a one-line error listing the known ones."""
    try:
        return REGISTRY[name]
    except KeyError:
        raise bad_choice("experiment", name, ALL) from None


__all__ = [
    "ALL",
    "OWN_RECORDS",
    "PAPER_FIGURES",
    "REGISTRY",
    "FigureSpec",
    "Panel",
    "Series",
    "spec_of",
]
