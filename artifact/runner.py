"""The per-rank measurement loop every experiment shares (docs/design.md sections 3 and 5).

For one phase (a mode, or an isolated-communication run) of one repetition:
  1. `iters` timed iterations, each started together on all ranks (barrier) and
     measured device-synchronised: E2E of an iteration is the slowest rank's time.
  2. the same number of iterations under torch.profiler, each marked, parsed into the
     kernel table: per-iteration compute / communication / memory time and the overlap
     fraction. Timing and profiling are separate so profiler overhead never reaches E2E.
Ranks' numbers are gathered on rank 0, which alone writes records.
"""

from __future__ import annotations

import json
import logging
import os
import re
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import torch
import torch.distributed as dist
from torch.profiler import ProfilerActivity, profile

from artifact import procs
from artifact.config import Preset
from artifact.measure import kernels, power
from artifact.measure.timing import synchronize, timed
from artifact.modes import SEQUENTIAL_REPEAT
from artifact.options import RunOptions
from artifact.store import RunStore, atomic_write_text

log = logging.getLogger(__name__)

BASE_UNITS = {
    "e2e_ms": "ms",
    "compute_ms": "ms",
    "communication_ms": "ms",
    "memory_ms": "ms",
    "overlap_fraction": "ratio",
    "delay_ms": "ms",
    "peak_memory_gib": "GiB",
    "profiled_span_ms": "ms",
}
GIB = 1 << 30
# per-rank values reduced by their maximum (the rank that needs most), not their mean
MAX_OVER_RANKS = ("peak_memory_gib",)


PROGRESS_EVERY_S = 5.0  # how often the progress beacon may be rewritten (it is fsynced)


@dataclass
class RunContext:
    figure: str
    preset: Preset
    device: torch.device
    rank: int
    world_size: int
    store: RunStore
    provenance: dict[str, Any]
    reps: int
    warmup: int
    iters: int
    traces_dir: Path | None = None  # where rep 0's traces are kept; None keeps none
    options: RunOptions = field(default_factory=RunOptions)  # experiment knobs from the CLI
    gpu_index: int = 0  # the physical GPU (NVML's index) this rank drives
    power_backend: power.Backend = field(default_factory=power.NoneBackend)
    power_interval_s: float = power.DEFAULT_INTERVAL_S
    _last_progress: float = -1e9
    _last_step: str = ""
    where: dict[str, Any] = field(default_factory=dict)  # the beacon's fields, kept between calls

    @property
    def is_writer(self) -> bool:
        return self.rank == 0

    def progress(self, what: str, **where: Any) -> None:
        """Tell the launcher's hang watchdog and the CLI's display (artifact/progress.py)
        this rank is alive, and where: rank 0 writes OUT/logs/<figure>.progress, JSON with
        `what` and the `where` fields given so far (config_k, config_n, config_id, rep_k,
        rep_n, phase, phase_k, phase_n). A new step, or new fields, is written at once; the
        iterations of one step at most every few seconds (the file is fsynced)."""
        if not self.is_writer:
            return
        self.where |= where
        now, step = time.monotonic(), re.sub(r"\d+", "#", what)
        if not where and step == self._last_step and now - self._last_progress < PROGRESS_EVERY_S:
            return
        self._last_progress, self._last_step = now, step
        beacon = json.dumps({"what": what, **self.where})
        atomic_write_text(self.store.root / "logs" / f"{self.figure}.progress", beacon)

    def barrier(self) -> None:
        if dist.is_initialized() and self.world_size > 1:
            dist.barrier()
        synchronize(self.device)


def broadcast(obj: Any) -> Any:
    if not (dist.is_initialized() and dist.get_world_size() > 1):
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def gather(obj: Any) -> list[Any]:
    """Every rank's `obj`, on every rank."""
    if not (dist.is_initialized() and dist.get_world_size() > 1):
        return [obj]
    out: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(out, obj)
    return out


class ConfigPoint(NamedTuple):
    """One configuration of a sweep: its id (the records' folder), the settings every
    record carries, and the workload's own spec (FsdpSpec, PipelineSpec, MicrobenchSpec)."""

    config_id: str
    config: dict[str, Any]
    spec: Any


def pending(
    ctx: RunContext,
    configs: list[ConfigPoint],
    phases: tuple[str, ...],
    numbered: tuple[int, int] | None = None,
) -> Iterator[tuple[ConfigPoint, list[int]]]:
    """Each configuration with repetitions still to measure, and those repetitions; one
    whose every phase of every repetition is on disk is skipped (a resumed run). The
    progress beacon is told which configuration of how many is under way: of `configs`,
    or, for a figure that walks several lists (fig4: FSDP then pipeline), `numbered`
    = (configurations before this list, configurations of the figure)."""
    before, total = numbered or (0, len(configs))
    for k, point in enumerate(configs, before + 1):
        where = {"config_k": k, "config_n": total, "config_id": point.config_id}
        ctx.progress(f"{point.config_id}: set-up", **where, rep_k=None, phase=None, phase_k=None)
        todo = [r for r in range(ctx.reps) if not rep_done(ctx, point.config_id, phases, r)]
        if todo:
            yield point, todo
        else:
            log.info("%s: all %d repetitions on disk, skipped", point.config_id, ctx.reps)


def log_repetition(ctx: RunContext, config_id: str, rep: int, results: dict) -> None:
    """Rank 0's line a repetition, for the log file (the console shows the digest)."""
    if not ctx.is_writer:
        return
    over, seq = results["overlap"], results["sequential"]
    mfu = f", MFU {over['mfu']:.3f}" if "mfu" in over else ""
    log.info(
        "%s rep %d/%d: overlap %.3f ms, sequential %.3f ms%s",
        *(config_id, rep + 1, ctx.reps, over["e2e_ms"], seq["e2e_ms"], mfu),
    )


class StopRequested(Exception):
    """The user pressed Ctrl-C once: stop at a repetition boundary, everything finished kept."""


def stop_requested(ctx: RunContext) -> None:
    """Raise StopRequested on every rank when the CLI asked to stop (a first Ctrl-C writes
    OUT/logs/<figure>.stop); checked between repetitions, so none is left half-measured."""
    asked = (ctx.store.root / "logs" / f"{ctx.figure}.stop").exists() if ctx.is_writer else None
    if broadcast(asked):
        raise StopRequested()


SHARED_ENV = "ARTIFACT_ALLOW_SHARED_DEVICE"  # set by the CLI's --allow-shared-device


def check_gpu_alone(ctx: RunContext) -> None:
    """After each configuration: no other job has started on our GPUs meanwhile (its
    load would enter every number). Every rank looks at its own GPU and all agree."""
    ours = set(gather(os.getpid()))
    gpu = {ctx.gpu_index: ctx.power_backend}
    mine = procs.other_gpu_processes(gpu, ours, visible_only=True)
    found = [p for rank in gather(mine) for p in rank]
    procs.refuse_shared(found, allow=os.environ.get(SHARED_ENV) == "1")


def rep_done(ctx: RunContext, config_id: str, phases: tuple[str, ...], rep: int) -> bool:
    """Whether every phase of this repetition is on disk (rank 0 decides for all ranks)."""
    done = (
        all(ctx.store.has(ctx.figure, config_id, p, rep) for p in phases) if ctx.is_writer else None
    )
    return bool(broadcast(done))


def _profiler_options(device: torch.device) -> dict[str, Any]:
    """On a CPU, ops of every thread: V2's delayed communication chain runs in a thread of
    its own (artifact.workloads.microbench), and the profiler sees only the calling
    thread's ops otherwise. GPU kernels are recorded whatever thread launched them."""
    if device.type == "cuda":
        return {}
    from torch._C._profiler import _ExperimentalConfig

    return {"experimental_config": _ExperimentalConfig(profile_all_threads=True)}


def profiler_activities(device: torch.device) -> list[ProfilerActivity]:
    acts = [ProfilerActivity.CPU]
    if device.type == "cuda":
        acts.append(ProfilerActivity.CUDA)
    return acts


def measure_phase(
    ctx: RunContext,
    step: Callable[[], None],
    *,
    trace_name: str,
    keep_trace: bool,
    comm: tuple[str, ...] = ("communication",),
    iters: int | None = None,
) -> dict[str, list[float]]:
    """This rank's per-iteration numbers for one phase (see the module docstring).

    `iters` overrides the preset's measured iterations (slow FP32 configurations)."""
    iters = iters or ctx.iters
    if ctx.device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(ctx.device)
    e2e = []
    for i in range(iters):
        ctx.progress(f"{trace_name}: timed iteration {i + 1}/{iters}")
        ctx.barrier()
        e2e.append(timed(step, ctx.device))
    ctx.barrier()
    with tempfile.TemporaryDirectory() as tmp:
        with profile(
            activities=profiler_activities(ctx.device), **_profiler_options(ctx.device)
        ) as prof:
            for i in range(iters):
                ctx.progress(f"{trace_name}: profiled iteration {i + 1}/{iters}")
                with kernels.iteration_marker(i):
                    step()
                synchronize(ctx.device)
        path = Path(tmp) / "trace.json"
        if keep_trace and ctx.traces_dir is not None:
            ctx.traces_dir.mkdir(parents=True, exist_ok=True)
            path = ctx.traces_dir / f"{trace_name}-rank{ctx.rank}.json"
        # exported under a temporary name, then renamed: a kill or a full disk never
        # leaves a truncated trace under its final name
        tmp_path = path.with_name(f".{path.name}.tmp")
        try:
            prof.export_chrome_trace(str(tmp_path))
            os.replace(tmp_path, path)
        finally:
            tmp_path.unlink(missing_ok=True)
        table = kernels.kernel_table(kernels.load_trace(path))
    per_iter = kernels.per_iteration(table, iters, comm)
    out = {
        "e2e_ms": [t * 1e3 for t in e2e],
        "compute_ms": (per_iter["compute_us"] / 1e3).tolist(),
        "communication_ms": (per_iter["communication_us"] / 1e3).tolist(),
        "memory_ms": (per_iter["memory_us"] / 1e3).tolist(),
        "overlap_fraction": per_iter["overlap_fraction"].tolist(),
        # E2E of the profiled pass as the device saw it: E2E / this shows whether the
        # timed and the profiled passes ran alike (Eq. 4 mixes the two)
        "profiled_span_ms": (per_iter["span_us"] / 1e3).tolist(),
    }
    if ctx.device.type == "cuda":
        out["peak_memory_gib"] = [torch.cuda.max_memory_allocated(ctx.device) / GIB]
    if per_iter["delay_us"].any():  # only V2 injects a delay; other records stay as they were
        out["delay_ms"] = (per_iter["delay_us"] / 1e3).tolist()
    return out


POWER_UNITS = {
    "power_mean_w": "W",
    "power_peak_w": "W",
    "power_polled_mean_w": "W",
    "power_mean_pct_tdp": "%",
    "power_peak_pct_tdp": "%",
    "energy_per_iter_j": "J",
    "power_resolution_ms": "ms",
    "energy_resolution_ms": "ms",
    "power_window_s": "s",
    "sm_clock_mean_mhz": "MHz",
}


def measure_power(
    ctx: RunContext, step: Callable[[], None], seconds: float | None = None
) -> dict[str, list[float]]:
    """Repeat `step` for `seconds` (default: the preset's power window) under the sampler;
    this rank's numbers.

    Empty where there is no telemetry (backend 'none') or the window is 0: power then
    stays out of the records rather than being recorded as zeros.
    """
    seconds = ctx.preset.power_window_s if seconds is None else seconds
    if ctx.power_backend.name == "none" or seconds <= 0:
        return {}
    ctx.barrier()
    iters = 0
    with power.PowerSampler(ctx.power_backend, ctx.power_interval_s) as sampler:
        t_end = time.perf_counter() + seconds
        while time.perf_counter() < t_end:
            ctx.progress("power window")
            step()
            iters += 1
        synchronize(ctx.device)
    w = power.window_power(sampler.samples())
    tdp = ctx.power_backend.power_limit_w()
    values = {
        "power_mean_w": w.mean_w,
        "power_peak_w": w.peak_w,
        "power_polled_mean_w": w.polled_mean_w,
        "power_mean_pct_tdp": 100 * w.mean_w / tdp,
        "power_peak_pct_tdp": 100 * w.peak_w / tdp,
        "energy_per_iter_j": w.energy_j / iters,
        "power_resolution_ms": w.resolution_s * 1e3,
        "energy_resolution_ms": w.energy_resolution_s * 1e3,
        "power_window_s": w.seconds,
        "sm_clock_mean_mhz": w.sm_clock_mean_mhz,
    }
    return {k: [v] for k, v in values.items()}


def _nanmean(values) -> float:
    """Mean ignoring NaN (the overlap fraction of a phase without communication); NaN if all are."""
    x = np.asarray(values, dtype=float)
    x = x[~np.isnan(x)]
    return float(x.mean()) if x.size else float("nan")


def reduce_ranks(per_rank: dict[str, list[float]]) -> tuple[dict[str, float], list[dict] | None]:
    """Gather every rank's per-iteration lists; rank 0 gets (metrics, per-rank means).

    E2E is the mean over iterations of the slowest rank; kernel times and the overlap
    fraction are means over iterations and ranks. Other ranks get ({}, None).
    """
    gathered = gather(per_rank)
    if dist.is_initialized() and dist.get_rank() != 0:
        return {}, None
    metrics: dict[str, float] = {}
    for key in per_rank:
        if key in MAX_OVER_RANKS:
            metrics[key] = float(np.nanmax(np.concatenate([g[key] for g in gathered])))
        elif key == "e2e_ms":
            n = min(len(g[key]) for g in gathered)
            metrics[key] = float(np.max([g[key][:n] for g in gathered], axis=0).mean())
        else:
            metrics[key] = _nanmean(np.concatenate([g[key] for g in gathered]))
    per_rank_means = [{k: _nanmean(v) for k, v in g.items()} for g in gathered]
    return metrics, per_rank_means


def measure_repetition(
    ctx: RunContext,
    *,
    config_id: str,
    config: dict[str, Any],
    rep: int,
    phases: tuple[str, ...],
    step_of: Callable[[str], Callable[[], None]],
    units: dict[str, str],
    comm: tuple[str, ...] = ("communication",),
    per_rank_extra: Callable[[str], dict[str, list[float]]] | None = None,
    finish: Callable[[str, dict[str, float]], dict[str, float]] | None = None,
    extra: dict[str, Any] | None = None,
    power_window_s: float | None = None,
    iters: int | None = None,
) -> dict[str, dict[str, float]]:
    """One repetition: every phase timed, profiled and (with telemetry) held under the
    power sampler, in the given order; rank 0 then writes one record a phase. The A/A
    repeat (modes.SEQUENTIAL_REPEAT) is timed and profiled only, its trace not kept.
    (Over 60 lines, on purpose: the whole protocol of a repetition, docs/design.md section
    3, reads top to bottom here; most of the length is its keyword arguments.)

    `per_rank_extra(phase)` adds this rank's own lists (a loss) before ranks are reduced;
    `finish(phase, metrics)` adds what follows from the reduced metrics (MFU, bandwidth).
    `power_window_s` overrides the preset's power window (0: no power for this repetition),
    `iters` its measured iterations.
    Returns the metrics by phase (empty dicts on ranks other than 0).
    """
    results = {}
    for k, phase in enumerate(phases, 1):
        where = {"rep_k": rep + 1, "rep_n": ctx.reps, "phase_k": k, "phase_n": len(phases)}
        ctx.progress(f"{config_id}: {phase}", **where, phase=phase)
        step = step_of(phase)
        # the A/A repeat is a timing check: no trace kept, no power window (its cost)
        check = phase == SEQUENTIAL_REPEAT
        per_rank = measure_phase(
            ctx,
            step,
            trace_name=f"{config_id}-{phase}",
            keep_trace=rep == 0 and not check,
            comm=comm,
            iters=iters,
        )
        if per_rank_extra is not None:
            per_rank |= per_rank_extra(phase)
        per_rank |= measure_power(ctx, step, 0.0 if check else power_window_s)
        m, per_rank_means = reduce_ranks(per_rank)
        if ctx.is_writer and finish is not None:
            m = finish(phase, m)
        results[phase] = (m, per_rank_means)
    if ctx.is_writer:
        for phase, (m, per_rank_means) in results.items():
            ctx.store.write_record(
                figure=ctx.figure,
                config_id=config_id,
                config=config,
                mode=phase,
                rep=rep,
                metrics=m,
                units=units,
                provenance=ctx.provenance,
                extra={"per_rank": per_rank_means, **(extra or {})},
            )
    return {phase: m for phase, (m, _) in results.items()}
