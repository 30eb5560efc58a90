"""Experiments: one module a figure, each declaring its sweep, its records and its table.

An experiment module provides
    run(ctx)    rank-level: measure and write records (or a status saying why not)
    DERIVED     derived quantities for summary.csv
and may provide
    default_reps(preset)   repetitions when the CLI is given none (default: the preset's)
"""

from __future__ import annotations

import importlib
from types import ModuleType

from artifact.config import check_figure
from artifact.errors import ArtifactError

IMPLEMENTED = {
    fig: f"artifact.experiments.{fig}"
    for fig in ("fig4", "fig6", "fig7", "fig8", "fig9", "fig10", "fig11", "contention", "v2")
}
# Figures drawn from another figure's records: the same runs, measured once.
SAME_RECORDS_AS = {"fig5": "fig4"}


def records_figure(figure: str) -> str:
    """The figure whose experiment and records serve `figure`."""
    return SAME_RECORDS_AS.get(check_figure(figure), figure)


def get_experiment(figure: str) -> ModuleType:
    figure = records_figure(figure)
    if figure not in IMPLEMENTED:
        raise ArtifactError(f"{figure}: not implemented yet")
    return importlib.import_module(IMPLEMENTED[figure])
