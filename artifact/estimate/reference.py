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


def values(name: str) -> dict[str, Any]:
    return dict(entry(name)["values"])


def source(name: str) -> str:
    return entry(name)["run"]


def step_rates() -> dict[tuple[str, str], float]:
    """(parallelism, precision) -> FLOP/s one GPU achieved in the overlap mode."""
    return {tuple(k.split("/")): v * 1e12 for k, v in values("step_rates_tflops").items()}
