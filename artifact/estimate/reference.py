"""The cost model's calibration and the report's reference times: package data
(artifact/data/reference.json), each entry naming the run it came from. Read through
importlib.resources, so a wheel installed anywhere has it; nothing here reads results/."""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

from artifact.core.errors import ArtifactError


@cache
def _data() -> dict[str, Any]:
    return json.loads(resources.files("artifact.data").joinpath("reference.json").read_text())


def entry(name: str) -> dict[str, Any]:
    """One entry: {'run': where it came from, 'how': ..., 'value' or 'values': ...}."""
    try:
        return _data()[name]
    except KeyError:
        raise ArtifactError(f"artifact/data/reference.json has no entry '{name}'") from None


def value(name: str) -> float:
    return entry(name)["value"]


def of(name: str, key: str) -> Any:
    """entry `name`'s value for `key` (a figure, a precision); a missing one is a one-line
    error naming the entry and the keys it has, not a KeyError."""
    values = entry(name)["values"]
    if key not in values:
        raise ArtifactError(
            f"artifact/data/reference.json: '{name}' has no value for '{key}' "
            f"(it has: {', '.join(values)}); add one, measured, with its run"
        )
    return values[key]


def stand_in(name: str, figure: str) -> str | None:
    """The figure whose value of entry `name` prices `figure`, which has none of its own
    (a figure not yet measured): the first, in the registry's order, that runs the same
    experiment and has one. None where there is no such figure."""
    from artifact.figures import REGISTRY, spec_of  # the registry imports pandas: only here

    values, experiment = entry(name)["values"], spec_of(figure).experiment
    kin = (f for f, s in REGISTRY.items() if s.experiment == experiment and f in values)
    return None if experiment is None else next(kin, None)


def of_figure(name: str, figure: str) -> Any:
    """entry `name`'s value for `figure`, else its stand-in's (a new figure priced as the
    figures of its experiment); neither is a one-line error naming the figure and entry."""
    values = entry(name)["values"]
    if figure in values:
        return values[figure]
    if (kin := stand_in(name, figure)) is None:
        raise ArtifactError(
            f"{figure}: artifact/data/reference.json '{name}' has no value for it nor for "
            f"another figure of its experiment (it has: {', '.join(values)}); "
            f"run {figure} once and add the measured value with its run"
        )
    return values[kin]


def values(name: str) -> dict[str, Any]:
    return dict(entry(name)["values"])


def source(name: str) -> str:
    return entry(name)["run"]


def step_rates() -> dict[tuple[str, str], float]:
    """(parallelism, precision) -> FLOP/s one GPU achieved in the overlap mode."""
    return {tuple(k.split("/")): v * 1e12 for k, v in values("step_rates_tflops").items()}
