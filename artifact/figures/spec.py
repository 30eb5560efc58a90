"""What a figure is: one FigureSpec per file of this package (docs/design.md section 2).

A spec says, without importing torch, what the figure runs (an experiment module under
artifact/experiments/, called on every rank), whose records it reads, what it derives
from them (summary.csv's 'derived' rows), how it is plotted, and which expected file
judges it. The CLI, nox, summarize, compare, plan and the report all read the registry
(artifact.figures), so adding a figure is adding one file here plus its expected YAML.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from artifact.core.config import PRECISIONS, Preset
from artifact.core.errors import ArtifactError
from artifact.figures.sweeps import SWEEPS, TRAINING_SWEEPS, Where


@dataclass(frozen=True)
class Derived:
    """metric = fn(mean of inputs[0], mean of inputs[1], ...); inputs are (mode, metric).

    fn must accept numpy arrays (the CI evaluates it on batches and per repetition).
    """

    metric: str
    fn: Callable[..., float]
    inputs: tuple[tuple[str, str], ...]
    unit: str


@dataclass(frozen=True)
class Series:
    """One line or bar group of a plot: summary rows of (mode, metric)."""

    mode: str
    metric: str
    label: str


@dataclass(frozen=True)
class Panel:
    """One bar chart over configurations; `percent` plots ratios (0.12) as % (12)."""

    series: tuple[Series, ...]
    y_label: str
    percent: bool = False


# the run options (fields of artifact.core.options.RunOptions) of the two kinds of experiment
# (every figure's loop is runner.pending, so every one takes `adaptive`)
TRAINING_OPTIONS = frozenset({"models", "power_interval_s", "recompute", "fsdp_impl", "adaptive"})
MICROBENCH_OPTIONS = frozenset(
    {"precision", "matmul_size", "comm_bytes", "power_interval_s", "adaptive"}
)


def _preset_reps(preset: Preset) -> int:
    return preset.reps


@dataclass(frozen=True)
class FigureSpec:
    name: str  # "fig4": the CLI's, nox's and the records' name
    title: str  # the paper's words: "Fig. 4: compute slowdown under overlap"
    experiment: str | None  # module under artifact.experiments with run(ctx, **params)
    options: frozenset[str]  # run options it honours (fields of artifact.core.options.RunOptions)
    params: Mapping[str, Any] = field(default_factory=dict)  # run()'s keyword arguments
    records_of: str | None = None  # drawn from another figure's records (fig5: fig4's)
    # configurations already measured for that figure in the same output folder (same id
    # and settings, every repetition) are copied from its records, not run again
    reuses: str | None = None
    derived: tuple[Derived, ...] = ()
    panels: tuple[Panel, ...] = ()  # the report's figure, one panel each
    expected: str | None = None  # file under expected/
    in_paper: bool = True  # False: an experiment beyond the paper's figures
    default_reps: Callable[[Preset], int] = _preset_reps
    # option -> why it does not apply, where a refusal can say more than "it takes: ..."
    why_not: Mapping[str, str] = field(default_factory=dict)
    # reads power telemetry: a machine without it (a CPU) records the figure "not run"
    needs_telemetry: bool = False
    # co-locates NCCL ranks on one GPU without --colocate: its ranks turn on NCCL's multi-rank mode
    colocates_nccl_ranks: bool = False
    # What the plan, compare and the report do for this figure beyond the above, declared
    # here so that they name no figure (tests/test_figure_literals.py):
    # samples power in timed blocks and keeps repetition 0's labelled trace (OUT/traces/NAME/):
    # the plan prices the blocks, the report plots the trace instead of bars
    power_trace: bool = False
    # sets the GPU's power limit, so runs only with --allow-power-cap (the plan and the
    # report say so, and the report notes the caps its status recorded)
    caps_power: bool = False
    # the report's sections on its rows, by kind (artifact.report.build.SECTIONS and
    # artifact.report.validations.VALIDATIONS name the kinds): "contention map", ...
    report_sections: tuple[str, ...] = ()
    # compare's checks of its rows, by kind (artifact.judge.compare.CHECKS names them)
    checks: tuple[str, ...] = ()

    @property
    def runs_noise_floor(self) -> bool:
        """Whether it derives the noise floor of Eq. 1 (artifact.analyze.noise) from the A/A
        repeat; the figures whose repetitions run the repeat are figures.runs_aa_repeat."""
        return any(d.metric == "noise_floor" for d in self.derived)

    @property
    def trains(self) -> bool:
        """Whether its configurations are training steps (sweeps.TRAINING_SWEEPS)."""
        return SWEEPS.get(self.experiment or "") in TRAINING_SWEEPS

    @property
    def records(self) -> str:
        """The figure whose runs and records serve this one."""
        return self.records_of or self.name

    def sweep(self) -> Callable[..., list]:
        """The experiment's sweep (artifact.figures.sweeps), torch-free."""
        if self.experiment is None:
            raise TypeError(f"{self.name} has no experiment: it reads {self.records}'s records")
        if self.experiment not in SWEEPS:
            raise ArtifactError(
                f"{self.name}: no sweep for experiment {self.experiment!r}; known: "
                f"{', '.join(SWEEPS)} (artifact/figures/sweeps.py SWEEPS)"
            )
        return SWEEPS[self.experiment]

    def configs(self, where: Where | Preset):
        """The figure's configurations (sweeps' points), in the order its run walks them:
        the only list of them. A preset alone: as the plan prices it (Where.planned)."""
        where = Where.planned(where) if isinstance(where, Preset) else where
        return self.sweep()(where, **self.params)

    def check_params(self) -> FigureSpec:
        """The spec's params bound to its sweep's keyword arguments, torch-free: a misspelt
        one is one line naming it and the accepted ones (the registry checks it on every
        lookup, so before anything starts)."""
        if self.experiment in SWEEPS:  # one without a sweep is refused where it is priced
            _bind(self, "sweep", SWEEPS[self.experiment])
        for key in ("precision", "precisions"):  # a value, checked before plan.json and ranks
            for value in _as_tuple(self.params.get(key, ())):
                if value not in PRECISIONS:
                    raise ArtifactError(
                        f"{self.name}: params {key} has {value!r}; accepted: {', '.join(PRECISIONS)}"
                    )
        return self

    def module(self) -> ModuleType:
        """The experiment's module (imports torch and the workloads), its run(ctx, ...)
        checked against the spec's params."""
        if self.experiment is None:
            raise TypeError(f"{self.name} has no experiment: it reads {self.records}'s records")
        module = importlib.import_module(f"artifact.experiments.{self.experiment}")
        _bind(self, "experiment", module.run)
        return module

    def run(self, ctx) -> None:
        """Rank level: measure and write records."""
        self.module().run(ctx, **self.params)


def _as_tuple(value) -> tuple:
    return tuple(value) if isinstance(value, list | tuple) else (value,)


def _bind(spec: FigureSpec, what: str, fn: Callable) -> None:
    """inspect.signature(fn).bind(first, **params), its TypeError as one ArtifactError line."""
    parameters = list(inspect.signature(fn).parameters.values())[1:]  # after ctx / where
    accepted = [
        p.name for p in parameters if p.kind is p.KEYWORD_ONLY or p.kind is p.POSITIONAL_OR_KEYWORD
    ]
    try:
        inspect.signature(fn).bind(None, **spec.params)
    except TypeError:
        unknown = [k for k in spec.params if k not in accepted]
        missing = [
            p.name
            for p in parameters
            if p.default is p.empty
            and p.name not in spec.params
            and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)
        ]
        bad = (
            f"unknown param {unknown[0]!r}"
            if unknown
            else f"missing param {missing[0]!r}"
            if missing
            else f"params {sorted(spec.params)}"
        )
        raise ArtifactError(
            f"{spec.name}: {bad} of {what} {spec.experiment!r}; accepted: "
            f"{', '.join(accepted) or 'none'}"
        ) from None
