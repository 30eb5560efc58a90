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

# The lists below are read from REGISTRY at each call, not copied at import, so every
# stage sees the same figures (tests/test_registry.py adds a throwaway one).


def all_figures() -> tuple[str, ...]:
    return tuple(REGISTRY)


def paper_figures() -> tuple[str, ...]:
    return tuple(n for n, s in REGISTRY.items() if s.in_paper)


def own_records() -> tuple[str, ...]:
    """What `python -m artifact all` runs: every figure but those drawn from another's records."""
    return tuple(n for n, s in REGISTRY.items() if s.records_of is None)


def runs_aa_repeat(name: str) -> bool:
    """Whether the figure's repetitions run the A/A repeat: where it derives Eq. 1's noise
    floor, or where a figure that copies its records does (fig8 copies fig6's), so that
    the copy holds every phase."""
    return spec_of(name).runs_noise_floor or any(
        s.reuses == name and s.runs_noise_floor for s in REGISTRY.values()
    )


def spec_of(name: str) -> FigureSpec:
    """The figure's spec; an unknown name is a one-line error listing the known ones."""
    try:
        return REGISTRY[name]
    except KeyError:
        raise bad_choice("experiment", name, all_figures()) from None


__all__ = [
    "REGISTRY",
    "FigureSpec",
    "Panel",
    "Series",
    "all_figures",
    "own_records",
    "paper_figures",
    "runs_aa_repeat",
    "spec_of",
]
