"""Experiments: one module a figure, each declaring its sweep, its records and its table.

An experiment module provides
    configs(preset, world_size, device) -> list of (config_id, config dict, spec)
    run(ctx)                             rank-level: measure and write records
    DERIVED                              derived quantities for summary.csv
"""

from __future__ import annotations

import importlib
from types import ModuleType

from artifact.config import check_figure
from artifact.errors import ArtifactError

IMPLEMENTED = {fig: f"artifact.experiments.{fig}" for fig in ("fig6", "fig7", "fig8", "fig9")}


def get_experiment(figure: str) -> ModuleType:
    check_figure(figure)
    if figure not in IMPLEMENTED:
        raise ArtifactError(f"{figure}: not implemented yet")
    return importlib.import_module(IMPLEMENTED[figure])
