"""`python -m artifact plan`: what a run will do before it starts (no torch: instant).

One row per configuration (figure, model, parallelism, precision, micro-batch), with
- memory per GPU: training rows use artifact.memory (within 20 % of every peak measured
  on an H200, tests/test_memory.py); microbenchmark rows add up their buffers (matmul or
  add operands 3 x n x dtype bytes, the all-reduce buffer, its copy for the copy proxy)
  plus memory.RUNTIME_OVERHEAD. A row that does not fit is recorded "not run" by the
  run (artifact.capability) and costs no time here.
- wall time, by the method its `method` column names (METHODS below),
- disk for its records and rep 0's traces (DISK_METHOD).
The configurations replicate the experiments' own sweeps (each builder names its source):
the experiment modules import torch at the top, so they cannot be imported here.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import math
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from artifact import memory
from artifact.config import (
    PRESETS,
    ComputeKind,
    ModelConfig,
    Preset,
    get_model,
    get_preset,
)
from artifact.errors import ArtifactError
from artifact.figures import OWN_RECORDS, spec_of

RUN = Path(__file__).resolve().parent.parent / "results" / "h200x1" / "all-quick"
RATES_CSV = RUN / "summary.csv"

# Wall time of each figure at the tiny preset on 2 idle AMD EPYC cores (README's time
# table: `bash .ci/run` from a fresh clone, DeepSpeed's CPU op already built; its first
# build adds about 40 s to fig4).
TINY_MEASURED_S = {
    "fig4": 27.0,
    "fig6": 10.0,
    "fig7": 10.0,
    "fig8": 12.0,
    "fig9": 10.0,
    "fig10": 34.0,
    "fig11": 24.0,
    "contention": 12.0,
    "v2": 12.0,
}
# The same at the quick preset on one H200: `nox -s all` at one commit, with the A/A
# repeat (results/h200x1/session6/README.md; fig7 ran across two device calls there, so
# its time is session 4's). The constants below were calibrated on an earlier run without
# the repeat (results/h200x1/all-quick), which the plan prices on its own; the estimates
# are within -8 % to +12 % of these (fig9's 15 s start-up against 20 s: -25 %), and
# tests/test_plan.py checks fig4, fig10 and fig11.
QUICK_H200_MEASURED_S = {
    "fig4": 197.0,
    "fig6": 123.0,
    "fig7": 114.0,
    "fig8": 122.0,
    "fig9": 20.0,
    "fig10": 303.0,
    "fig11": 199.0,
    "contention": 126.0,
    "v2": 27.0,
}
# A figure's process start (imports, NCCL, telemetry): 14-19 s when it had nothing to do.
FIGURE_STARTUP_S = 15.0
# Set-up a configuration (build, profiler export and parsing, calibration), calibrated so
# that quick on one H200 gives each figure's measured time: training from fig10 + fig11
# (5 configurations; fig4 is then an independent check), the others from their own figure
# (so those match the measurement by construction).
SETUP_S = {"training": 25.5, "fig6": 13.0, "fig8": 13.5, "fig7": 20.0, "contention": 5.5, "v2": 2.0}
# One H200 (artifact/config.py's contention comment): an 8192^3 GEMM in ms, and an add of
# 2^28 bf16 elements (3 x 512 MiB moved) in 0.38 ms.
GEMM_8192_MS = {"bf16": 1.43, "fp16": 1.49, "tf32": 2.73, "fp32": 21.7}
ADD_BYTES_PER_S = 3 * (1 << 28) * 2 / 0.38e-3

# Mean bytes of one record (one repetition, one mode), by figure: `tar tzvf
# results/h200x1/all-quick/records.tgz`. fig7's power series: 13-16 KB a configuration.
RECORD_BYTES = {
    "fig4": 3127,
    "fig6": 3336,
    "fig7": 4428,
    "fig8": 3336,
    "fig10": 3054,
    "fig11": 3041,
    "contention": 2940,
    "v2": 2782,
}
FIG7_SERIES_BYTES = 14_000
# Profiler traces (rep 0, one a mode a rank) measured in a tiny run on 2 CPU cores
# (`nox -s all`): FSDP 1.54-1.86 MB for 2 layers x 2 iterations, pipeline 0.75-0.94 MB
# for 1 layer x 2 micro-batches x 2 iterations, microbenchmarks 10-11 KB. Scaled by the
# layer passes a rank profiles; GPU traces also hold kernel events, so larger.
TRACE_BYTES_PER_LAYER_PASS = {"fsdp": 425_000, "pipeline": 210_000}
MICRO_TRACE_BYTES = 11_000

# Precisions a CPU run records "not run" (status/fig10.json, fig11.json of a tiny run).
CPU_UNSUPPORTED = {
    "fp16": "FP16 is not supported on a CPU (DeepSpeed's accelerator)",
    "tf32": "TF32 exists only on NVIDIA GPUs",
}

METHODS = {
    "flops": "6 x params x tokens / (GPUs x TFLOP/s measured on one H200, overlap mode, "
    "results/h200x1/all-quick/summary.csv), x (m+p-1)/m pipeline bubble; steps = warm-up x 3 "
    "+ 2 passes x iterations x 4 phases (3 modes and the A/A repeat) x reps, + power windows "
    "of the 3 modes + {training:g} s set-up "
    "(calibrated); communication not added: a lower bound on several GPUs",
    "micro": "reps x (4 phases x power window + 4 or 5 phases (fig8, fig9, contention and v2 "
    "add the A/A repeat) x 2 x iterations x the compute's time on one H200), + set-up a configuration calibrated on quick, one H200 (fig6 {fig6:g} s, fig8 "
    "{fig8:g}, fig7 {fig7:g}, contention {contention:g}, v2 {v2:g})",
    "measured": "the figure's measured wall time (README, tiny on 2 CPU cores), split evenly "
    "over its configurations",
    "not run": "recorded 'not run' before anything is built: nothing beyond the start-up",
    "start-up": f"a figure's process start, measured: 14-19 s (quick, one H200); {FIGURE_STARTUP_S:g} s",
}
DISK_METHOD = (
    "records: reps x modes x the mean record size of results/h200x1/all-quick/records.tgz; "
    "traces: rep 0, each mode and rank, sized from a tiny CPU run's traces per layer pass "
    "(GPU traces add kernel events: a lower bound)"
)


@dataclasses.dataclass
class Row:
    figure: str
    model: str
    parallelism: str
    precision: str
    micro_batch: int | None
    gpus: int
    memory_gib: float | None
    memory_method: str  # "estimate" (artifact.memory), "buffers" or "-"
    fits: bool | None  # the memory estimate against --gpu-memory-gib (None: no configuration)
    time_s: float  # what the run will spend on it (0 when it does not fit)
    time_s_if_run: float
    method: str  # a key of METHODS
    records_bytes: int
    traces_bytes: int
    note: str = ""
    runs: bool | None = None  # fits, and the device supports its precision (None: no configuration)

    def __post_init__(self) -> None:
        if self.runs is None and self.fits is not None:
            self.runs = self.fits


def _itemsize(precision: str) -> int:
    return 4 if precision in ("fp32", "tf32") else 2


def measured_rates(path: Path = RATES_CSV) -> dict[tuple[str, str], float]:
    """(parallelism, precision) -> FLOP/s a GPU achieved (overlap mode), mean over figures."""
    if not path.is_file():
        raise ArtifactError(f"no measured rates: '{path}' is missing")
    seen: dict[tuple[str, str], list[float]] = {}
    with path.open(newline="") as f:
        for r in csv.DictReader(f):
            if r["metric"] == "tflops_per_gpu" and r["mode"] == "overlap":
                seen.setdefault((r["parallelism"], r["precision"]), []).append(float(r["mean"]))
    return {k: sum(v) / len(v) * 1e12 for k, v in seen.items()}


def model_at(preset: Preset, name: str) -> ModelConfig:
    """artifact.experiments.training.model_of: the preset may shorten the sequence."""
    m = get_model(name)
    seq = preset.seq_len
    return dataclasses.replace(m, seq_len=seq) if seq and m.seq_len > seq else m


# --- configurations: the experiments' own sweeps, replicated --------------------------


def training_grid(preset: Preset, figure: str) -> list[tuple[str, str, int, str]]:
    """(model, parallelism, micro-batch, precision): fig4.py (models x micro-batches, both
    parallelisms, the preset's precision); fig10 and fig11: FSDP at the first micro-batch in
    the precisions their specs give (artifact/figures/)."""
    if figure == "fig4":
        grid = [(m, mb) for m in preset.models for mb in preset.micro_batches]
        return [(m, par, mb, preset.precision) for par in ("fsdp", "pipeline") for m, mb in grid]
    precisions = spec_of(figure).params["precisions"]
    mb = preset.micro_batches[0]
    return [(m, "fsdp", mb, p) for m in preset.models for p in precisions]


def microbench_grid(preset: Preset, world: int, device: str) -> list[tuple[str, str, int, int]]:
    """fig8.configs: (comm, precision, matmul size, comm bytes); one GPU adds two proxies."""
    mb = preset.microbench
    comms = ["allreduce"] + (["onerank-avg", "copy"] if world == 1 and device == "cuda" else [])
    return [(c, mb.dtype, mb.matmul_size, mb.comm_bytes) for c in comms]


PARALLELISM = {"allreduce": "allreduce", "onerank-avg": "proxy-nccl-onerank", "copy": "proxy-copy"}


def contention_grid(
    preset: Preset, world: int, device: str
) -> list[tuple[str, int, ComputeKind, int]]:
    """contention.mechanisms x kinds x sizes: (comm, CTA limit, kind, comm bytes)."""
    sweep = preset.contention
    if world == 1 and device == "cuda":
        mechs = [("onerank-avg", 0), ("copy", 0)]
    elif device != "cuda":
        mechs = [("allreduce", 0)]
    else:
        mechs = [("allreduce", c) for c in sweep.cta_limits]
    return [(c, ctas, k, b) for c, ctas in mechs for k in sweep.computes for b in sweep.comm_bytes]


# --- estimates --------------------------------------------------------------------------


def training_memory(
    model: ModelConfig, par: str, mb: int, prec: str, world: int, gb: int, recompute: bool = False
) -> float:
    """artifact.memory's estimate, as training.cannot_run asks it (SDPA attention)."""
    if par == "fsdp":
        return memory.fsdp_bytes(model, mb, prec, world, recompute)
    nmb = max(1, gb // mb)
    return memory.pipeline_bytes(
        model, mb, nmb, prec, world, materialised_attention=False, recompute=recompute
    )


# recomputation runs every forward twice: 8 x params x tokens of work instead of 6
RECOMPUTE_COST = 8 / 6
# phases a repetition: training's overlap, sequential, its A/A repeat and nocomm
TRAINING_PHASES = 4


def step_seconds(
    model: ModelConfig, par: str, mb: int, prec: str, world: int, gb: int, rates
) -> float:
    n = memory.total_params(model)
    if (par, prec) not in rates:
        known = ", ".join(f"{p}/{q}" for p, q in sorted(rates))
        raise ArtifactError(f"no measured rate for {par} {prec}; measured: {known}")
    if par == "fsdp":
        return 6 * n * mb * model.seq_len * world / (world * rates[(par, prec)])
    nmb = max(1, gb // mb)
    bubble = (nmb + world - 1) / nmb
    return 6 * n * mb * nmb * model.seq_len / (world * rates[(par, prec)]) * bubble


def _windowed(window_s: float, step_s: float) -> float:
    """measure_power: steps repeated until the window is over (at least one)."""
    return 0.0 if window_s <= 0 else max(1, math.ceil(window_s / step_s)) * step_s


def _compute_s(kind: ComputeKind) -> float:
    """One iteration of a contention compute kind on one H200."""
    if kind.compute == "gemm":
        return kind.units * GEMM_8192_MS[kind.precision] * 1e-3 * (kind.size / 8192) ** 3
    return kind.units * 3 * kind.size * _itemsize(kind.precision) / ADD_BYTES_PER_S


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

    @property
    def cap(self) -> float:
        return self.gpu_memory_gib * memory.GIB


def _training_rows(t: Target, fig: str) -> list[Row]:
    p, world, rows = t.preset, t.world, []
    for name, par, mb, prec in training_grid(p, fig):
        m = model_at(p, name)
        need = training_memory(m, par, mb, prec, world, p.global_batch)
        budget = p.recompute_above_gib  # the preset's rule (artifact.memory.with_recompute)
        recompute = budget is not None and need > budget * memory.GIB
        if recompute:
            need = training_memory(m, par, mb, prec, world, p.global_batch, recompute=True)
        fits = need <= t.cap
        why_not = CPU_UNSUPPORTED.get(prec) if t.device == "cpu" else None
        runs = fits and not why_not
        iters = (p.fp32_iters if prec in ("fp32", "tf32") else None) or p.iters_per_rep
        nmb = max(1, p.global_batch // mb)
        passes = m.layers * iters if par == "fsdp" else -(-m.layers // world) * nmb * iters
        traces = 3 * world * passes * TRACE_BYTES_PER_LAYER_PASS[par]
        records = p.reps * TRAINING_PHASES * RECORD_BYTES[fig]
        secs, method = 0.0, "measured"
        if t.device == "cuda":
            step = step_seconds(m, par, mb, prec, world, p.global_batch, t.rates)
            step *= RECOMPUTE_COST if recompute else 1
            steps = p.warmup * 3 + 2 * iters * TRAINING_PHASES * p.reps
            power = p.reps * 3 * _windowed(p.power_window_s, step)  # not the A/A repeat
            secs, method = steps * step + power + SETUP_S["training"], "flops"
        note = "" if fits else f"not run: {need / memory.GIB:.0f} GiB > {t.gpu_memory_gib:g}"
        note = f"not run: {why_not}" if fits and why_not else note
        note = "; ".join(x for x in ("recompute on" if recompute else "", note) if x)
        if par == "pipeline":
            stages = f"{world} stage(s), {nmb} micro-batch" + ("es" if nmb > 1 else "")
            note = "; ".join(x for x in (stages, note) if x)
        rows.append(
            Row(fig, name, par, prec, mb, world, need / memory.GIB, "estimate", fits,
                secs if runs else 0.0, secs, method, records if runs else 0,
                traces if runs else 0, note, runs)
        )  # fmt: skip
    return rows


def _microbench_costs(p: Preset, fig: str, i: int, t_iter: float, world: int) -> tuple:
    """(seconds a repetition, record bytes, trace bytes, extra note) of one microbenchmark row."""
    reps = spec_of(fig).default_reps(p)
    if fig == "fig7":
        return 4 * max(0.5, p.power_window_s / 2), reps * RECORD_BYTES[fig], FIG7_SERIES_BYTES, ""
    traces = 4 * world * MICRO_TRACE_BYTES  # the A/A repeat keeps no trace
    # the microbenchmark's four, plus the A/A repeat where the figure reports Eq. 1
    phases = 4 + spec_of(fig).runs_noise_floor
    if fig == "v2":
        frac = p.v2.delay_fractions[i]
        per_rep = phases * 2 * p.iters_per_rep * t_iter * (1 + frac)
        return per_rep, reps * phases * RECORD_BYTES[fig], traces, f"delay {frac:g} x compute"
    windows = 4 * _windowed(p.power_window_s, t_iter)
    per_rep = windows + phases * 2 * p.iters_per_rep * t_iter
    return per_rep, reps * phases * RECORD_BYTES[fig], traces, ""


def _microbench_rows(t: Target, fig: str) -> list[Row]:
    p, world, rows = t.preset, t.world, []
    grid = microbench_grid(p, world, t.device)
    if fig == "v2":  # v2.base_config: the collective that occupies the device here
        by_comm = {g[0]: g for g in grid}
        grid = [by_comm.get("onerank-avg") or by_comm["allreduce"]] * len(p.v2.delay_fractions)
    if t.device != "cuda" and fig in ("fig6", "fig7"):
        return [
            Row(fig, "-", "-", "-", None, world, None, "-", None, 0.0, 0.0, "measured",
                0, 0, "not run: no power telemetry on a CPU")
        ]  # fmt: skip
    for i, (comm, prec, size, comm_bytes) in enumerate(grid):
        t_iter = (
            p.microbench.matmuls_per_iter * GEMM_8192_MS.get(prec, 1.43) * 1e-3 * (size / 8192) ** 3
        )
        per_rep, records, traces, extra = _microbench_costs(p, fig, i, t_iter, world)
        notes = ["one-GPU proxy" if comm != "allreduce" else "", extra]
        if fig in ("fig6", "fig7"):
            notes.append("needs NVML or AMD-SMI, else not run")
        secs = SETUP_S[fig] + spec_of(fig).default_reps(p) * per_rep
        need = _buffers(size, prec, comm_bytes, comm) + memory.RUNTIME_OVERHEAD
        fits = need <= t.cap
        rows.append(
            Row(fig, f"matmul-{size}", PARALLELISM[comm], prec, None, world,
                need / memory.GIB, "buffers", fits, secs if fits else 0.0, secs, "micro",
                records if fits else 0, traces if fits else 0,
                "; ".join(n for n in notes if n))
        )  # fmt: skip
    return rows


def _contention_rows(t: Target, fig: str) -> list[Row]:
    sweep, world, rows = t.preset.contention, t.world, []
    for comm, ctas, kind, size in contention_grid(t.preset, world, t.device):
        t_iter = _compute_s(kind)
        window = sweep.power_window_s if size == sweep.power_at_bytes else 0.0
        per_rep = 4 * _windowed(window, t_iter) + 5 * 2 * sweep.iters * t_iter
        secs = SETUP_S["contention"] + sweep.reps * per_rep
        par = PARALLELISM[comm] if not ctas else f"allreduce-{ctas}cta"
        numel = kind.size if kind.compute == "add" else None
        need = _buffers(kind.size, kind.precision, size, comm, numel) + memory.RUNTIME_OVERHEAD
        fits = need <= t.cap
        size_s = f"{size >> 20} MiB" if size >= 1 << 20 else f"{size >> 10} KiB"
        rows.append(
            Row(fig, kind.name, par, kind.precision, None, world, need / memory.GIB,
                "buffers", fits, secs if fits else 0.0, secs, "micro",
                sweep.reps * 5 * RECORD_BYTES[fig] if fits else 0,
                4 * world * MICRO_TRACE_BYTES if fits else 0, f"all-reduce {size_s}")
        )  # fmt: skip
    return rows


def _fig9_rows(t: Target, fig: str) -> list[Row]:
    return [
        Row(fig, "-", "-", "-", None, t.world, None, "-", None, 0.0, 0.0, "not run", 0, 0,
            "not run without --allow-power-cap (with it: fig8's configurations x 6 power levels)")
    ]  # fmt: skip


# each figure's rows, by the experiment its spec names (artifact/figures/)
ROWS_OF = {
    "fig4": _training_rows,
    "precision_sweep": _training_rows,
    "fig6": _microbench_rows,
    "fig7": _microbench_rows,
    "fig8": _microbench_rows,
    "v2": _microbench_rows,
    "contention": _contention_rows,
    "fig9": _fig9_rows,
}


def build(preset: Preset, figures: Iterable[str], gpus: int, gpu_memory_gib: float) -> list[Row]:
    device = "cpu" if preset.device == "cpu" else "cuda"
    t = Target(preset, gpus, device, gpu_memory_gib, measured_rates() if device == "cuda" else {})
    rows = []
    for fig in figures:
        fig_rows = ROWS_OF[spec_of(fig).experiment](t, fig)
        if device == "cuda":
            startup = Row(fig, "(start-up)", "-", "-", None, gpus, None, "-", None,
                          FIGURE_STARTUP_S, FIGURE_STARTUP_S, "start-up", 0, 0)  # fmt: skip
            fig_rows.insert(0, startup)
        if device == "cpu":  # tiny: the figure's measured time, split over its rows
            share = TINY_MEASURED_S[fig] / sum(1 for r in fig_rows if r.runs is not False)
            for r in fig_rows:
                r.time_s_if_run = share
                r.time_s = share if r.runs is not False else 0.0
                r.method = "measured"
        rows += fig_rows
    return rows


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


# --- the command --------------------------------------------------------------------------


def visible_gpus() -> int:
    """GPUs this machine shows, without torch: CUDA_VISIBLE_DEVICES, else /dev/nvidiaN (0: none)."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        return len([d for d in env.split(",") if d.strip() and d.strip() != "-1"])
    dev = Path("/dev")
    return sum(1 for f in dev.glob("nvidia*") if re.fullmatch(r"nvidia\d+", f.name))


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument(
        "figures", nargs="*", metavar="FIG", help="fig4 ... fig11, contention, v2 (default: all)"
    )
    ap.add_argument(
        "--preset", help="tiny (CPU), quick or paper; default: quick with a GPU, tiny without"
    )
    ap.add_argument(
        "--gpus", type=int, help="GPUs (FSDP world size, pipeline stages); default: this machine's"
    )
    ap.add_argument(
        "--gpu-memory-gib", type=float, default=80.0, help="memory a GPU has (default 80)"
    )
    ap.add_argument("--json", action="store_true", help="rows and totals as JSON")
    ap.add_argument("--summary", action="store_true", help="per-figure totals only")


def _figures(names: list[str]) -> list[str]:
    if not names:
        return list(OWN_RECORDS)
    # fig5 is fig4's records
    out = [spec_of(n).records for n in names]
    return list(dict.fromkeys(out))


def plan(args: argparse.Namespace) -> tuple[Preset, int, list[Row]]:
    """Check the arguments (ArtifactError naming the bad value) and build the rows."""
    figures = _figures(args.figures)
    found = visible_gpus()
    preset = get_preset(args.preset or ("quick" if found else "tiny"))
    if args.gpus is not None and args.gpus < 1:
        raise ArtifactError(f"--gpus must be at least 1, got {args.gpus}")
    if not args.gpu_memory_gib > 0 or math.isinf(args.gpu_memory_gib):
        raise ArtifactError(
            f"--gpu-memory-gib must be a positive number, got {args.gpu_memory_gib:g}"
        )
    if preset.device == "cpu":
        if args.gpus not in (None, preset.cpu_processes):
            raise ArtifactError(
                f"preset 'tiny' runs {preset.cpu_processes} CPU processes, --gpus {args.gpus} "
                f"does not apply; accepted presets for GPUs: "
                + ", ".join(n for n, q in PRESETS.items() if q.device == "gpu")
            )
        gpus = preset.cpu_processes
    else:
        gpus = args.gpus or max(1, found)
    return preset, gpus, build(preset, figures, gpus, args.gpu_memory_gib)


def _dur(s: float) -> str:
    if s < 120:
        return f"{s:.0f} s"
    if s < 2 * 3600:
        return f"{s / 60:.1f} min"
    return f"{s / 3600:.1f} h"


def _size(b: float) -> str:
    for unit, k in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if b >= k:
            return f"{b / k:.1f} {unit}"
    return f"{b:.0f} B"


def render(preset: Preset, gpus: int, gib: float, rows: list[Row], summary: bool) -> str:
    unit = "CPU processes" if preset.device == "cpu" else "GPU(s)"
    lines = [f"plan: preset {preset.name}, {gpus} {unit}, {gib:g} GiB a GPU"]
    if not summary:
        head = ("figure", "model", "parallelism", "prec", "mb", "GiB/GPU", "fits", "time", "method", "disk", "note")  # fmt: skip
        table = [head]
        for r in rows:
            mem = "-" if r.memory_gib is None else f"{r.memory_gib:.1f}"
            if r.memory_method == "buffers":
                mem += " (buf)"
            fits = {True: "yes", False: "NO", None: "-"}[r.fits]
            table.append(
                (r.figure, r.model, r.parallelism, r.precision,
                 "-" if r.micro_batch is None else str(r.micro_batch), mem, fits,
                 _dur(r.time_s_if_run) if r.runs is not False else f"({_dur(r.time_s_if_run)})", r.method, _size(r.records_bytes + r.traces_bytes), r.note)
            )  # fmt: skip
        widths = [max(len(t[i]) for t in table) for i in range(len(head) - 1)]
        for t in table:
            lines.append(
                "  ".join(c.ljust(w) for c, w in zip(t, widths, strict=False)) + "  " + t[-1]
            )
        lines.append("")
        lines.append(
            "memory: artifact.memory's estimate (training; within 20 % of the peaks measured "
            "on an H200) or (buf) the microbenchmark's buffers + 1 GiB runtime"
        )
        used = dict.fromkeys(r.method for r in rows)
        for m in used:
            lines.append(f"time [{m}]: " + METHODS[m].format(**SETUP_S))
        lines.append("disk: " + DISK_METHOD)
        lines.append("")
    by_fig: dict[str, list[Row]] = {}
    for r in rows:
        by_fig.setdefault(r.figure, []).append(r)
    for fig, rs in by_fig.items():
        t = totals(rs)
        skip = f", {t['not_run']} not run" if t["not_run"] else ""
        lines.append(
            f"{fig:<11}{t['configurations']:>4} configurations{skip:<18} {_dur(t['time_s']):>9}"
            f"  disk {_size(t['disk_bytes'])}"
        )
    t = totals(rows)
    lines.append(
        f"total: {t['configurations']} configurations, {t['fit']} fit {gib:g} GiB a GPU, "
        f"{t['not_run']} recorded 'not run'; {_dur(t['time_s'])} "
        f"({_dur(t['time_s_if_all_ran'])} if all ran); disk {_size(t['disk_bytes'])} "
        f"(records {_size(t['records_bytes'])}, traces {_size(t['traces_bytes'])})"
    )
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    preset, gpus, rows = plan(args)
    if args.json:
        doc = {
            "preset": preset.name,
            "gpus": gpus,
            "gpu_memory_gib": args.gpu_memory_gib,
            "rows": [dataclasses.asdict(r) for r in rows],
            "totals": totals(rows),
            "methods": {k: v.format(**SETUP_S) for k, v in METHODS.items()},
            "disk_method": DISK_METHOD,
        }
        print(json.dumps(doc, indent=1))
    else:
        print(render(preset, gpus, args.gpu_memory_gib, rows, args.summary))
    return 0


def main(argv: list[str] | None = None) -> int:
    """`python -m artifact.plan` (the CLI's `plan` command calls run())."""
    ap = argparse.ArgumentParser(
        prog="python -m artifact plan", description=__doc__.splitlines()[0]
    )
    add_arguments(ap)
    return run(ap.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
