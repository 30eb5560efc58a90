"""The plan's cost model: for each configuration a run will measure, its memory per GPU,
wall time and disk. Pure functions of the preset, the GPU count and memory, and the
calibration data (artifact/data/reference.json, through reference.py); no torch.

- memory: training rows use artifact.estimate.memory (on an H200, ZeRO-3's estimate is 1-2 %
  above the peaks at world size 1 and up to 5 % below them as rank 0 of 4; the pipeline's
  13 % above its one peak; tests/test_memory.py); microbenchmark rows add up their buffers plus
  memory.RUNTIME_OVERHEAD. A row fits where memory.fits says (the estimate plus a 10 %
  margin); a training row that does not is recorded "not run" by the run
  (artifact.rank.capability checks it against the free memory) and costs no time.
- wall time: by the method its `method` column names (METHODS below).
- disk: records and rep 0's traces (DISK_METHOD).

The configurations are each figure's own (FigureSpec.configs: artifact/figures/sweeps.py,
torch-free, which the experiments walk too; tests/test_sweeps.py runs both and compares
their ids); this module prices one configuration at a time. The phases come from
artifact/core/phases.py, which the experiments read too.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable
from typing import Any

from artifact.core import units
from artifact.core.config import PRECISIONS, ComputeKind, ModelConfig, Preset
from artifact.core.errors import ArtifactError
from artifact.core.options import RunOptions
from artifact.core.phases import (
    FIG7_BLOCKS,
    FIG7_MIN_BLOCK_S,
    TRAINING_MODES,
    microbench_phases,
    training_phases,
)
from artifact.core.units import GIB
from artifact.estimate import memory
from artifact.estimate import reference as ref
from artifact.figures import REGISTRY, own_records, runs_aa_repeat, spec_of
from artifact.figures.sweeps import (
    PLANNED_GPU,
    POWER_LEVELS,
    REFUSED_HERE,
    ContentionPoint,
    MicroPoint,
    TrainingPoint,
    Where,
    model_at,
)

# A phase (artifact.rank.runner.measure_phase): settled, then timed for at least the preset's
# iterations and seconds (the power window included), then profiled for `iters` steps.
# Settling, as measured on one H200 (results/h200x1/session8): training phases used
# 1.2-1.9 s of a 1.5 s bound (host jitter keeps ZeRO-3's step times from agreeing), the
# microbenchmark's 0.3 s (its lower bound); so training is priced at the middle of its
# bounds and the microbenchmark at its lower bound.


def settle_seconds(p: Preset, step_s: float, training: bool) -> float:
    low = min(max(p.warmup * step_s, p.settle_min_s), max(p.settle_max_s, step_s))
    low = max(low, step_s)
    return (low + max(p.settle_max_s, low)) / 2 if training else low


def phase_seconds(
    p: Preset, step_s: float, iters: int, *, training: bool, timed_iters: int | None = None,
    timed_s: float | None = None, window_s: float | None = None,
) -> float:  # fmt: skip
    """One phase: settle + timed pass + profiled pass (artifact.rank.runner.measure_phase)."""
    window = p.power_window_s if window_s is None else window_s
    seconds = max(p.timed_min_s if timed_s is None else timed_s, window)
    least = timed_iters or p.timed_min_iters or iters
    timed = max(least * step_s, seconds)
    return settle_seconds(p, step_s, training) + timed + iters * step_s


def training_rep_seconds(
    p: Preset, step_s: float, iters: int, phases: int, timed_iters: int | None = None
) -> float:
    """One training repetition (artifact.rank.runner.measure_repetition, interleaved):
    rounds of every phase settle (at least one and the preset's lower bound: training's
    clock is steady by then), timed rounds (each phase at least the
    preset's iterations and seconds, the power window inside), each phase profiled."""
    round_s = phases * step_s
    settle = round_s * max(1, math.ceil(p.settle_min_s / round_s))
    seconds = max(p.timed_min_s, p.power_window_s)
    rounds = max(timed_iters or p.timed_min_iters or iters, math.ceil(seconds / step_s))
    return settle + rounds * round_s + phases * p.profiled_iters(step_s, iters) * step_s


# recomputation runs every forward twice: 8 x params x tokens of work instead of 6
RECOMPUTE_COST = 8 / 6

# Precisions a CPU run records "not run" (status/fig10.json, fig11.json of a tiny run).
CPU_UNSUPPORTED = {
    "fp16": "FP16 is not supported on a CPU (DeepSpeed's accelerator)",
    "tf32": "TF32 exists only on NVIDIA GPUs",
}

METHODS = {
    "flops": "a step: 6 x params x tokens / (GPUs x TFLOP/s measured on one H200, overlap mode: "
    "{rates}), x (m+p-1)/m pipeline bubble; per repetition, 4 phases (3 modes and the A/A "
    "repeat; 6 with the zero-byte controls on several GPUs) in interleaved rounds: rounds "
    "settling to the preset's lower bound (at least one), timed rounds (each phase at least "
    "the preset's iterations and seconds, the power window inside; ZeRO-3's half-precision "
    "rows at the preset's most rounds), then each phase profiled (its iterations, or where "
    "the preset sizes them by time at least one and its profiled seconds); + warm-up x 3 steps + "
    "{training:g} s set-up (calibrated); communication not added: a lower bound on several "
    "GPUs; a configuration a figure reuses ({training_reuses}) costs nothing where both run",
    "micro": "repetitions x phases (4; + the A/A repeat in {micro_repeats}; + 2 zero-byte "
    "controls where the all-reduce moves data) x (settling at its lower bound + the "
    "timed pass, at least the preset's iterations and seconds or the power window + the "
    "profiled iterations) at the compute's time on one H200, + set-up per configuration "
    "calibrated on quick, one H200 ({micro_setup}); {micro_reuses}",
    "measured": "the figure's measured wall time (tiny on 2 CPU cores: {tiny}), split evenly "
    "over its configurations",
    "not run": "recorded 'not run' before anything is built: nothing beyond the start-up",
    "start-up": "a figure's process start, measured: 14-19 s (quick, one H200); {startup:g} s",
}
DISK_METHOD = (
    "records: repetitions x phases x the mean record size of {records}; traces: rep 0, each "
    "phase and rank, sized from a tiny CPU run's traces per layer pass (GPU traces add kernel "
    "events: a lower bound)"
)


def _and(names: list[str]) -> str:
    return " and ".join([", ".join(names[:-1]), names[-1]] if len(names) > 1 else names)


def _registry_words() -> dict[str, str]:
    """The methods' lists of figures, from the registry: which reuse whose rows, which
    microbenchmark figures run the A/A repeat, their calibrated set-up times."""
    trains = {n: s.trains for n, s in REGISTRY.items() if s.experiment}
    reuses = {n: s.reuses for n, s in REGISTRY.items() if s.reuses and n in trains}
    setup = ref.values("setup_s")
    return {
        "training_reuses": ", ".join(f"{n}'s from {s}" for n, s in reuses.items() if trains[n]),
        "micro_repeats": _and([n for n, t in trains.items() if not t and runs_aa_repeat(n)]),
        "micro_setup": ", ".join(f"{n} {setup[n]:g} s" for n in setup if n in trains),
        "micro_reuses": "; ".join(
            f"{n}'s rows are {s}'s where both run" for n, s in reuses.items() if not trains[n]
        ),
    }


def method_text(method: str) -> str:
    """A method's description, with the calibration it uses and the run that came from."""
    return METHODS[method].format(
        training=ref.of("setup_s", "training"),
        rates=ref.source("step_rates_tflops"),
        tiny=ref.source("tiny_measured_s"),
        startup=ref.value("figure_startup_s"),
        **_registry_words(),
    )


def disk_text() -> str:
    return DISK_METHOD.format(records=ref.source("record_bytes"))


@dataclasses.dataclass
class Row:
    figure: str
    model: str
    parallelism: str
    precision: str
    micro_batch: int | None
    gpus: int
    memory_gib: float | None
    memory_method: str  # "estimate" (artifact.estimate.memory), "buffers" or "-"
    fits: bool | None  # the memory estimate against the GPU's memory (None: no configuration)
    time_s: float  # what the run will spend on it (0 when it does not fit)
    time_s_if_run: float
    method: str  # a key of METHODS
    records_bytes: int
    traces_bytes: int
    note: str = ""
    runs: bool | None = None  # fits, and the device supports its precision (None: no configuration)
    # the paper's items (expected/*.yaml ids) it feeds (artifact.estimate.items; set by plan)
    feeds: list[str] = dataclasses.field(default_factory=list)
    config_id: str = ""  # the configuration's id, as its records will be named ("": none)

    def __post_init__(self) -> None:
        if self.runs is None and self.fits is not None:
            self.runs = self.fits


def _itemsize(precision: str) -> int:
    return 4 if precision in ("fp32", "tf32") else 2


def microbench_phase_count(figure: str, comm: str, world: int) -> int:
    """Phases a microbenchmark repetition measures (artifact.core.phases.microbench_phases;
    experiments.fig8.CONTROLLED: the mechanisms that run the zero-byte controls)."""
    moves_data = (comm == "allreduce" and world > 1) or comm in ("spin", "nccl-shaped", "coloc")
    return len(microbench_phases(runs_aa_repeat(figure), moves_data))


def figures_of(names: Iterable[str]) -> list[str]:
    """The figures a plan covers: every one that runs (none named), else each named one's
    records (fig5 is fig4's), once each."""
    names = list(names)
    if not names:
        return list(own_records())
    return list(dict.fromkeys(spec_of(n).records for n in names))


# --- estimates --------------------------------------------------------------------------


def training_memory(
    model: ModelConfig, par: str, mb: int, prec: str, world: int, gb: int, recompute: bool = False
) -> float:
    """artifact.estimate.memory's estimate, as training.cannot_run asks it (SDPA attention)."""
    if par == "fsdp":
        return memory.fsdp_bytes(model, mb, prec, world, recompute)
    nmb = max(1, gb // mb)
    return memory.pipeline_bytes(
        model, mb, nmb, prec, world, materialised_attention=False, recompute=recompute
    )


def step_seconds(
    model: ModelConfig, par: str, mb: int, prec: str, world: int, gb: int, rates
) -> float:
    """One training step: 6 x params x tokens at the measured rate, the pipeline's bubble."""
    n = memory.total_params(model)
    if (par, prec) not in rates:
        known = ", ".join(f"{p}/{q}" for p, q in sorted(rates))
        raise ArtifactError(f"no measured rate for {par} {prec}; measured: {known}")
    if par == "fsdp":
        return 6 * n * mb * model.seq_len * world / (world * rates[(par, prec)])
    nmb = max(1, gb // mb)
    bubble = (nmb + world - 1) / nmb
    return 6 * n * mb * nmb * model.seq_len / (world * rates[(par, prec)]) * bubble


def _gemm_s(precision: str, size: int) -> float:
    return ref.of("gemm_8192_ms", precision) * 1e-3 * (size / 8192) ** 3


def _compute_s(kind: ComputeKind) -> float:
    """One iteration of a contention compute kind on one H200."""
    if kind.compute == "gemm":
        return kind.units * _gemm_s(kind.precision, kind.size)
    add_bytes_per_s = 3 * (1 << 28) * 2 / ref.value("add_seconds_2e28_bf16")
    return kind.units * 3 * kind.size * _itemsize(kind.precision) / add_bytes_per_s


def _buffers(
    size: int, precision: str, comm_bytes: int, comm: str, numel: int | None = None
) -> float:
    """Microbench's buffers: a, b, c (size^2 or numel elements), the comm buffer, its copy."""
    n = numel if numel is not None else size * size
    return 3 * n * _itemsize(precision) + comm_bytes * (2 if comm == "copy" else 1)


@dataclasses.dataclass(frozen=True)
class Target:
    """What the plan is for: the preset, on how many GPUs of what memory."""

    preset: Preset
    world: int
    device: str  # "cpu" or "cuda"
    gpu_memory_gib: float
    rates: dict
    options: RunOptions = dataclasses.field(default_factory=RunOptions)  # the run's

    @property
    def cap(self) -> float:
        return self.gpu_memory_gib * GIB

    @property
    def where(self) -> Where:
        """Where the sweeps are walked, as the run's ranks walk them."""
        gpu = PLANNED_GPU if self.device == "cuda" else None
        return Where(self.preset, self.world, self.device, gpu, self.options)


def _training_rows(t: Target, fig: str, points: list[TrainingPoint]) -> list[Row]:
    p, world, rows = t.preset, t.world, []
    phases = len(training_phases(world))
    traced = phases - 1  # every phase but the A/A repeat keeps rep 0's trace
    for point in points:
        name, par, mb, prec = point.model, point.parallelism, point.micro_batch, point.precision
        m = model_at(p, name)
        recompute = point.recompute  # the preset's rule (memory.with_recompute), as the run's
        need = training_memory(m, par, mb, prec, world, p.global_batch, recompute=recompute)
        fits = memory.fits(need, t.cap)
        why_not = CPU_UNSUPPORTED.get(prec) if t.device == "cpu" else None
        runs = fits and not why_not
        slow = prec in ("fp32", "tf32")
        iters = (p.fp32_iters if slow else None) or p.iters_per_rep
        nmb = max(1, p.global_batch // mb)
        passes = m.layers * iters if par == "fsdp" else -(-m.layers // world) * nmb * iters
        # traces: rep 0 of every phase but the A/A repeat, each rank
        traces = traced * world * passes * ref.of("trace_bytes_per_layer_pass", par)
        records = p.reps * phases * ref.of_figure("record_bytes", fig)
        secs, method = 0.0, "measured"
        if t.device == "cuda":
            step = step_seconds(m, par, mb, prec, world, p.global_batch, t.rates)
            step *= RECOMPUTE_COST if recompute else 1
            timed = p.fp32_timed_iters if slow else p.timed_rounds or None
            if not slow and par == "fsdp" and p.timed_rounds_max:
                # ZeRO-3's steps jitter, so it runs rounds beyond the least; the pipeline's
                # do not: on one H200 ZeRO-3 ran 13-24 rounds (mean 22), the pipeline 8
                # (results/h200x1/session10/quick); priced at the most
                timed = p.timed_rounds_max
            rep = training_rep_seconds(p, step, iters, phases, timed_iters=timed)
            warmup = len(TRAINING_MODES) * step
            secs = warmup + p.reps * rep + ref.of("setup_s", "training")
            method = "flops"
        margin = f"{memory.FIT_MARGIN:.0%}"
        note = "" if fits else f"not run: {need / GIB:.1f} GiB + {margin} > {t.gpu_memory_gib:.1f}"
        note = f"not run: {why_not}" if fits and why_not else note
        note = "; ".join(x for x in ("recompute on" if recompute else "", note) if x)
        if par == "pipeline":
            stages = f"{world} stage(s), {nmb} micro-batch" + ("es" if nmb > 1 else "")
            note = "; ".join(x for x in (stages, note) if x)
        rows.append(
            Row(fig, name, par, prec, mb, world, need / GIB, "estimate", fits,
                secs if runs else 0.0, secs, method, records if runs else 0,
                traces if runs else 0, note, runs, config_id=point.config_id)
        )  # fmt: skip
    return rows


def _microbench_costs(
    p: Preset, fig: str, t_iter: float, world: int, comm: str = "allreduce",
    delay_fraction: float | None = None,
) -> tuple:  # fmt: skip
    """(seconds per repetition, record bytes, trace bytes, extra note) of one microbenchmark
    row; `delay_fraction`: V2's delay after each collective (a fraction of the compute)."""
    reps = spec_of(fig).default_reps(p)
    if spec_of(fig).power_trace:  # timed blocks, not iterations
        block_s = max(FIG7_MIN_BLOCK_S, p.power_window_s / 2)
        series = ref.value("fig7_series_bytes")
        return len(FIG7_BLOCKS) * block_s, reps * ref.of_figure("record_bytes", fig), series, ""
    phases = microbench_phase_count(fig, comm, world)
    # rep 0's trace of every phase but the A/A repeat, each rank
    traces = (phases - runs_aa_repeat(fig)) * world * ref.value("micro_trace_bytes")
    records = reps * phases * ref.of_figure("record_bytes", fig)
    if delay_fraction is not None:  # V2: no power window and no time floor (experiments.v2)
        frac = delay_fraction
        step = t_iter * (1 + frac)
        profiled = p.microbench.profiled_iters or p.iters_per_rep
        phase = phase_seconds(p, step, profiled, training=False, timed_s=0, window_s=0)
        return phases * phase, records, traces, f"delay {frac:g} x compute"
    profiled = p.microbench.profiled_iters or p.iters_per_rep
    phase = phase_seconds(p, t_iter, profiled, training=False)
    return phases * phase, records, traces, ""


def _microbench_rows(t: Target, fig: str, points: list[MicroPoint]) -> list[Row]:
    p, world, rows = t.preset, t.world, []
    for point in points:
        comm, prec, size, comm_bytes = (
            point.comm, point.precision, point.matmul_size, point.comm_bytes
        )  # fmt: skip
        gemm = ref.values("gemm_8192_ms")
        t_iter = p.microbench.matmuls_per_iter * _gemm_s(prec if prec in gemm else "bf16", size)
        per_rep, records, traces, extra = _microbench_costs(
            p, fig, t_iter, world, comm, point.delay_fraction
        )
        notes = ["one-GPU proxy" if comm != "allreduce" else "", extra]
        if spec_of(fig).needs_telemetry:
            notes.append("needs NVML or AMD-SMI, else not run")
        secs = ref.of_figure("setup_s", fig) + spec_of(fig).default_reps(p) * per_rep
        need = _buffers(size, prec, comm_bytes, comm) + memory.RUNTIME_OVERHEAD
        fits = memory.fits(need, t.cap)
        rows.append(
            Row(fig, point.model, point.parallelism, prec, None, world,
                need / GIB, "buffers", fits, secs if fits else 0.0, secs, "micro",
                records if fits else 0, traces if fits else 0,
                "; ".join(n for n in notes if n), config_id=point.config_id)
        )  # fmt: skip
    return rows


def _contention_rows(t: Target, fig: str, points: list[ContentionPoint]) -> list[Row]:
    sweep, world, rows = t.preset.contention, t.world, []
    for point in points:
        mech, kind, size = point.mech, point.kind, point.comm_bytes
        comm = mech.comm
        phases = microbench_phase_count(fig, comm, world)
        t_iter = _compute_s(kind)
        window = sweep.power_window_at(size, mech.every_size)
        phase = phase_seconds(t.preset, t_iter, sweep.iters, training=False,
                              timed_iters=sweep.iters, timed_s=0, window_s=window)  # fmt: skip
        per_rep = phases * phase
        secs = ref.of_figure("setup_s", fig) + sweep.reps * per_rep
        par = mech.parallelism
        numel = kind.size if kind.compute == "add" else None
        ranks = mech.spec.get("ranks", 1) if comm == "coloc" or mech.twin_of else 1  # own buffers
        need = (
            _buffers(kind.size, kind.precision, size * ranks, comm, numel) + memory.RUNTIME_OVERHEAD
        )
        fits = memory.fits(need, t.cap)
        traces = (phases - 1) * world * ref.value("micro_trace_bytes")
        rows.append(
            Row(fig, kind.name, par, kind.precision, None, world, need / GIB,
                "buffers", fits, secs if fits else 0.0, secs, "micro",
                sweep.reps * phases * ref.of_figure("record_bytes", fig) if fits else 0,
                traces if fits else 0, f"all-reduce {units.size(size)}",
                config_id=point.config_id)
        )  # fmt: skip
    return rows


# why a figure that caps the GPU's power (FigureSpec.caps_power) holds no configuration
WHY_NO_CAPS = (
    f"not run without --allow-power-cap (with it: fig8's configurations x {POWER_LEVELS} "
    "power levels)"
)


def _refused_here(t: Target, fig: str) -> str | None:
    """Why `fig` runs nothing here, by the preset and world alone (sweeps.REFUSED_HERE)."""
    check = REFUSED_HERE.get(spec_of(fig).experiment)
    return check(t.where) if check else None


def decided_not_run(fig: str, rows: list[Row]) -> bool:
    """Whether `all` records `fig` "not run" without starting it: a figure of
    sweeps.REFUSED_HERE whose every row the plan has "not run"."""
    mine = [r for r in rows if r.figure == fig and r.method != "start-up"]
    return spec_of(fig).experiment in REFUSED_HERE and all(r.method == "not run" for r in mine)


# each kind of configuration's cost model
ROWS_OF = {
    TrainingPoint: _training_rows,
    MicroPoint: _microbench_rows,
    ContentionPoint: _contention_rows,
}


def _figure_rows(t: Target, fig: str) -> list[Row]:
    """The figure's configurations (its spec's sweep), each priced; one row saying why
    where none runs here."""
    spec = spec_of(fig)
    points = spec.configs(t.where)
    if t.device != "cuda" and spec.needs_telemetry:
        return [
            Row(fig, "-", "-", "-", None, t.world, None, "-", None, 0.0, 0.0, "measured",
                0, 0, "not run: no power telemetry on a CPU")
        ]  # fmt: skip
    if not points:
        why = _refused_here(t, fig) or (
            WHY_NO_CAPS if spec.caps_power else "not run: no configuration in this preset"
        )
        return [
            Row(fig, "-", "-", "-", None, t.world, None, "-", None, 0.0, 0.0, "not run", 0, 0, why)
        ]  # fmt: skip
    kind = type(points[0])
    if kind not in ROWS_OF:
        raise ArtifactError(
            f"the plan has no cost model for {kind.__name__} ({fig}); it knows: "
            f"{', '.join(k.__name__ for k in ROWS_OF)} (artifact/estimate/model.py ROWS_OF)"
        )
    return ROWS_OF[kind](t, fig, points)


def build(
    preset: Preset, figures: Iterable[str], gpus: int, gpu_memory_gib: float,
    options: RunOptions | None = None, per_gpu: int = 1,
) -> list[Row]:  # fmt: skip
    """Every configuration of `figures` at `preset` on `gpus` GPUs of `gpu_memory_gib`, as
    a run with `options` (None: the defaults) walks them. `per_gpu` ranks share each GPU
    (--ranks-per-gpu): the world is gpus x per_gpu, and each rank has 1/per_gpu of a GPU's
    memory (a row's memory is the GPU's: per_gpu ranks' estimate)."""
    device = "cpu" if preset.device == "cpu" else "cuda"
    rates = ref.step_rates() if device == "cuda" else {}
    if preset.rehearsal:  # timed by the rehearsal's own measured figures, below
        rates = _every_rate(rates)
    t = Target(
        preset, gpus * per_gpu, device, gpu_memory_gib / per_gpu, rates, options or RunOptions()
    )
    startup_s = ref.value("figure_startup_s")
    rows = []
    for fig in figures:
        fig_rows = _figure_rows(t, fig)
        if device == "cuda" and not _refused_here(t, fig):
            startup = Row(fig, "(start-up)", "-", "-", None, gpus, None, "-", None,
                          startup_s, startup_s, "start-up", 0, 0)  # fmt: skip
            fig_rows.insert(0, startup)
        measured = _measured_entry(preset)
        if measured:  # tiny, rehearsal: the figure's measured time, split over its rows
            running = sum(1 for r in fig_rows if r.runs is not False)
            share = ref.of_figure(measured, fig) / max(running, 1)
            for r in fig_rows:
                r.time_s_if_run = share
                r.time_s = share if r.runs is not False else 0.0
                r.method = "measured"
        for r in fig_rows:
            if r.memory_gib is not None:
                r.memory_gib *= per_gpu
        _note_stand_in(fig, fig_rows, measured or "record_bytes")
        rows += _reused(fig, fig_rows, rows, priced=device == "cuda")
    return rows


def _measured_entry(preset: Preset) -> str | None:
    """The reference entry of a preset priced by its figures' measured times (None: by the
    step rates and the calibrated costs)."""
    if preset.rehearsal:
        return "rehearsal_measured_s"
    return "tiny_measured_s" if preset.device == "cpu" else None


def _every_rate(rates: dict) -> dict:
    """The measured rates, and the slowest of them for any (parallelism, precision)
    without one: the rehearsal's tiny steps are priced by its measured figures anyway."""
    slowest = min(rates.values())
    return {(p, q): rates.get((p, q), slowest) for p in ("fsdp", "pipeline") for q in PRECISIONS}


def _note_stand_in(fig: str, fig_rows: list[Row], entry: str) -> None:
    """A figure not measured yet is priced with the calibration of a figure of the same
    experiment (reference.stand_in); its rows say so."""
    if fig in ref.values(entry) or (kin := ref.stand_in(entry, fig)) is None:
        return
    for r in fig_rows:
        r.note = "; ".join(n for n in (r.note, f"priced with {kin}'s calibration") if n)


def _reused(fig: str, fig_rows: list[Row], before: list[Row], priced: bool) -> list[Row]:
    """Rows the figure copies from the figure it reuses, when that one runs first in the
    plan (artifact.rank.reuse): no time of their own (`priced`; a tiny
    figure's measured time already holds its copying)."""
    source = spec_of(fig).reuses
    measured = {
        (r.model, r.parallelism, r.precision, r.micro_batch)
        for r in before
        if r.figure == source and r.runs
    }
    for r in fig_rows:
        if r.runs and (r.model, r.parallelism, r.precision, r.micro_batch) in measured:
            if priced:
                r.time_s = r.time_s_if_run = 0.0
            r.note = "; ".join(n for n in (r.note, f"measured for {source}: its records") if n)
    return fig_rows


def totals(rows: list[Row]) -> dict[str, Any]:
    configs = [r for r in rows if r.fits is not None]
    return {
        "configurations": len(configs),
        "fit": sum(1 for r in configs if r.fits),
        "not_fit": sum(1 for r in configs if not r.fits),
        "not_run": sum(1 for r in configs if not r.runs),
        "time_s": sum(r.time_s for r in rows),
        "time_s_if_all_ran": sum(r.time_s_if_run for r in rows),
        "records_bytes": sum(r.records_bytes for r in rows),
        "traces_bytes": sum(r.traces_bytes for r in rows),
        "disk_bytes": sum(r.records_bytes + r.traces_bytes for r in rows),
    }
