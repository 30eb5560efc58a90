"""expected/*.yaml: the paper's numbers and claims, loaded and schema-checked.

Read by compare (which judges them) and by the report (which lists them beside the
experiments that test them); judging nothing itself.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from artifact.core.errors import ArtifactError
from artifact.env import REPO_ROOT
from artifact.figures import REGISTRY, extra_dir

EXPECTED_DIR = REPO_ROOT / "expected"
AGGREGATES = ("mean", "max", "cap_increase")
# the dimensions an item about the paper's whole grid may name (`grid`, artifact/judge/coverage.py)
GRID_DIMENSIONS = ("model", "parallelism", "micro_batch")
CLAIM_KINDS = {
    "every_row_positive": ("metric",),
    "group_greater": ("metric", "greater", "lesser"),
    "metric_greater": ("greater_metric", "lesser_metric"),
    "increases_with": ("metric", "along"),
    "decreases_with": ("metric", "along"),
}
NUMBER_KEYS = (
    "id",
    "statement",
    "metric",
    "rows",
    "aggregate",
    "value",
    "tolerance",
    "tolerance_why",
    "source",
    "scope",
)
CLAIM_KEYS = ("id", "statement", "kind", "rows", "source", "scope")
# what an item's `needs` may name (artifact/judge/scope.py)
NEEDS_KEYS = {"world": int, "min_params_b": float}
# an item that declares no `needs` (a figure of ARTIFACT_FIGURES_DIR's, a test's): any run
# speaks to it; every item of expected/ declares its own (tests/test_scope.py)
ANY_EVIDENCE = {"world": 1}
# Quantities that mean something only where communication ran beside compute: Eq. 1, the
# sequential penalty, Eq. 4 and its relatives, the overlap fraction, and the changes in
# power that overlap causes. At world size 1 a collective moves no data and runs no kernel.
NEEDS_COMMUNICATION = frozenset(
    {
        "slowdown",
        "slowdown_vs_nocomm",
        "comm_slowdown",
        "sequential_penalty",
        "e2e_ideal_ms",
        "e2e_above_ideal",
        "overlap_fraction",
        "peak_power_increase",
        "mean_power_increase",
        "energy_per_iter_change",
        "overlap_block_power_gap",
    }
)


@dataclass(frozen=True)
class ExpectedItem:
    """One number or claim of expected/*.yaml, checked (load_expected)."""

    id: str
    statement: str
    section: str  # "numbers" or "claims"
    file_figure: str  # the figure its file is about
    rows: dict[str, Any]  # summary.csv's columns and values its rows match
    source: dict[str, Any]  # where in the paper
    scope: str | list[str]  # "any", or the GPU names it was measured on
    needs: dict[str, float] = field(default_factory=lambda: dict(ANY_EVIDENCE))
    metric: str | None = None
    # a number's: how the rows combine (AGGREGATES), its value and tolerance band
    aggregate: str | None = None
    value: float | None = None
    tolerance: float | None = None
    tolerance_why: str | None = None
    # a claim's: its kind (CLAIM_KINDS) and what that kind reads
    kind: str | None = None
    greater: dict[str, Any] | None = None
    lesser: dict[str, Any] | None = None
    greater_metric: str | None = None
    lesser_metric: str | None = None
    along: str | None = None
    grid: list[str] | None = None  # an item about the paper's whole grid (coverage.py)
    requires: dict[str, Any] | None = None  # a precondition: {metric, at_least, why}

    @property
    def is_number(self) -> bool:
        return self.section == "numbers"

    @property
    def figures(self) -> list[str]:
        """The figures whose rows it reads (its rows' `figure`, else its file's)."""
        return [str(f) for f in as_list(self.rows.get("figure", self.file_figure))]


ITEM_KEYS = tuple(f.name for f in dataclasses.fields(ExpectedItem))


def metric_of(item: ExpectedItem) -> str | None:
    """The quantity an item is judged on (a metric_greater claim: its greater side)."""
    if not item.is_number and item.kind == "metric_greater":
        return item.greater_metric
    return item.metric


def _need(where: str, item: dict, keys: tuple[str, ...]) -> None:
    for k in keys:
        if k not in item:
            raise ArtifactError(f"{where}: missing key '{k}' (expected keys: {', '.join(keys)})")


def _check_item(where: str, section: str, item: dict[str, Any]) -> None:
    """One item's values (its keys are there: _need)."""
    if not isinstance(item["rows"], dict):
        raise ArtifactError(
            f"{where}: 'rows' must be a mapping like {{figure: fig4, mode: derived}}, got {item['rows']!r}"
        )
    if section == "numbers":
        if item["aggregate"] not in AGGREGATES:
            raise ArtifactError(
                f"{where}: aggregate {item['aggregate']!r}; accepted: {', '.join(AGGREGATES)}"
            )
        for k in ("value", "tolerance"):
            if not isinstance(item[k], int | float):
                raise ArtifactError(f"{where}: '{k}' must be a number, got {item[k]!r}")
    else:
        if item["kind"] not in CLAIM_KINDS:
            raise ArtifactError(
                f"{where}: kind {item['kind']!r}; accepted: {', '.join(CLAIM_KINDS)}"
            )
        _need(where, item, CLAIM_KINDS[item["kind"]])
    need = item.get("requires")
    if need is not None and not (
        isinstance(need, dict) and {"metric", "at_least", "why"} <= set(need)
    ):
        raise ArtifactError(
            f"{where}: 'requires' must be a mapping with metric, at_least and why, got {need!r}"
        )
    grid = item.get("grid")
    if grid is not None and not (
        isinstance(grid, list) and grid and set(grid) <= set(GRID_DIMENSIONS)
    ):
        raise ArtifactError(
            f"{where}: grid {grid!r}; accepted: a list of {', '.join(GRID_DIMENSIONS)}"
        )
    if not (item["scope"] == "any" or isinstance(item["scope"], list)):
        raise ArtifactError(f"{where}: scope must be 'any' or a list of GPU names")
    needs = item.setdefault("needs", dict(ANY_EVIDENCE))
    bad = (
        not isinstance(needs, dict)
        or "world" not in needs
        or set(needs) - set(NEEDS_KEYS)
        or not all(isinstance(v, int | float) and v > 0 for v in needs.values())
    )
    if bad:
        raise ArtifactError(
            f"{where}: needs {needs!r}; accepted: a mapping with world (ranks exchanging data) "
            f"and optionally min_params_b (billions of parameters), positive numbers"
        )


def load_expected(directory: Path = EXPECTED_DIR) -> list[ExpectedItem]:
    """Every item of every expected/*.yaml (and, for expected/, of the YAML files beside
    the figures of figures.EXTRA_ENV's folder), schema-checked, with its file's figure:
    headline.yaml first, then the figures' files in the registry's order."""
    items = []
    files = ["headline.yaml", *(s.expected for s in REGISTRY.values() if s.expected)]

    def order(path: Path) -> tuple:
        return (files.index(path.name) if path.name in files else len(files), path.name)

    paths = list(Path(directory).glob("*.yaml"))
    if Path(directory) == EXPECTED_DIR and extra_dir() is not None:  # figures.EXTRA_ENV's
        paths += [p for p in extra_dir().glob("*.yaml") if p.name not in {q.name for q in paths}]
    for path in sorted(paths, key=order):
        try:
            doc = yaml.safe_load(path.read_text())
        except yaml.YAMLError as e:
            raise ArtifactError(f"{path.name}: not valid YAML ({str(e).splitlines()[0]})") from None
        if not isinstance(doc, dict) or "figure" not in doc:
            raise ArtifactError(f"{path.name}: expected a mapping with key 'figure'")
        for section, keys in (("numbers", NUMBER_KEYS), ("claims", CLAIM_KEYS)):
            for i, item in enumerate(doc.get(section) or []):
                where = f"{path.name}: {section}[{i}]"
                if not isinstance(item, dict):
                    raise ArtifactError(f"{where}: expected a mapping")
                _need(where, item, keys)
                _check_item(where, section, item)
                items.append(
                    _typed(where, {**item, "section": section, "file_figure": doc["figure"]})
                )
    if not items:
        raise ArtifactError(f"no expected/*.yaml items under '{directory}'")
    return items


def _typed(where: str, item: dict[str, Any]) -> ExpectedItem:
    if unknown := sorted(set(item) - set(ITEM_KEYS)):
        raise ArtifactError(
            f"{where}: unknown key {unknown[0]!r}; accepted: {', '.join(ITEM_KEYS[:2] + ITEM_KEYS[4:])}"
        )
    return ExpectedItem(**item)


# How an item reads its rows and its GPU scope: compare judges with these, and rank 0's
# adaptive decision (artifact/rank/adaptive.py) reads its pilot with them, as compare would.
def as_list(v: Any) -> list:
    return v if isinstance(v, list) else [v]


def select(summary: pd.DataFrame, filters: dict[str, Any], metric: str | None) -> pd.DataFrame:
    """The summary's rows that match `filters`. Where several figures are asked for, a
    configuration both ran (one copies the other's records, rank/reuse.py) counts once,
    under the first figure listed: the same repetitions are not two pieces of evidence."""
    rows = summary
    if metric is not None:
        rows = rows[rows["metric"] == metric]
    for key, want in filters.items():
        rows = rows[rows[key].isin(as_list(want))]
    figures = as_list(filters.get("figure", []))
    if len(figures) > 1 and not rows.empty:
        order = rows["figure"].map(figures.index)
        rows = rows.loc[order.sort_values(kind="stable").index]
        rows = rows.drop_duplicates(["config_id", "mode", "metric"]).sort_index()
    return rows


def for_gpus(item: ExpectedItem, gpus: list[str]) -> bool:
    """Whether the item's scope (a GPU name it was measured on, or "any") covers `gpus`."""
    scope = item.scope
    return scope == "any" or any(s.lower() in g.lower() for s in scope for g in gpus)
