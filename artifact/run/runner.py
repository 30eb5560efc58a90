"""The per-rank measurement loop every experiment shares (docs/design.md sections 3 and 5).

For one phase (a mode, or an isolated-communication run) of one repetition:
  1. settle: the phase's own work runs until its step time and the SM clock are steady
     (bounded), so no phase inherits the previous one's power state;
  2. the timed pass: at least N iterations and S seconds (the preset's), queued back to
     back after one barrier and each timed between marks on the current stream (CUDA
     events; the host clock on a CPU), under the power sampler where there is telemetry,
     so the device never waits for the host; E2E of an iteration is the slowest rank's time,
     E2E of the phase the median iteration, with the count of outlying iterations. A
     workload's meter times its own spans over the same pass (the microbenchmark's
     compute, by CUDA events: a second of matmuls, not the profiler's tenth);
  3. the profiled pass: `iters` iterations under torch.profiler, each marked, parsed into
     the kernel table: per-iteration compute / communication / memory time and the overlap
     fraction. Timing and profiling are separate so profiler overhead never reaches E2E.
Training times its phases together instead, in interleaved rounds (1 and 2 for every
phase at once: `interleaved_timed_pass`, `round_adjusted`), then profiles each (3).
Ranks' numbers are gathered on rank 0, which alone writes records.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple, Protocol

import numpy as np
import torch
import torch.distributed as dist
from torch.profiler import ProfilerActivity, profile

from artifact.analyze import telemetry
from artifact.core.config import Preset
from artifact.core.options import RunOptions
from artifact.core.phases import balanced_order
from artifact.measure import kernels, power
from artifact.measure.timing import SpanTimer, gc_paused, synchronize, timed
from artifact.run import adaptive, emulation, procs
from artifact.run.modes import OVERLAP_REPEAT
from artifact.store import STOPPING, RunStore, atomic_write_text

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
    "e2e_outliers": "count",
    "timed_iters": "count",
    "profiled_iters": "count",
    "settle_s": "s",
    "settle_iters": "count",
    "settled": "ratio",
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
    # --adaptive: the repetitions decided for the configuration under way (None: not yet)
    decided: int | None = None

    @property
    def is_writer(self) -> bool:
        return self.rank == 0

    def progress(self, what: str, **where: Any) -> None:
        """Tell the launcher's hang watchdog and the CLI's display (artifact/run/progress.py)
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

    def rep_fields(self, rep: int) -> dict[str, Any]:
        """The beacon's repetition fields: repetition k of the decided n; while an adaptive
        configuration's pilot runs, of up to the maximum (`rep_upto`)."""
        upto = {"rep_upto": self.decided is None} if self.options.adaptive else {}
        return {"rep_k": rep + 1, "rep_n": self.decided or self.reps, **upto}

    def record_extra(self) -> dict[str, Any]:
        """What every record of an adaptive configuration notes: its decision is on disk."""
        if not self.options.adaptive:
            return {}
        return {"adaptive": {"max_reps": self.reps, "decision": f"../{STOPPING}"}}

    def barrier(self) -> None:
        if emulation.has_peers():
            dist.barrier()
        synchronize(self.device)


def broadcast(obj: Any) -> Any:
    if not emulation.has_peers():  # alone, or rank 0 of an emulated world
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def gather(obj: Any) -> list[Any]:
    """Every rank's `obj`, on every rank (rank 0's alone under emulation: no peers)."""
    if not emulation.has_peers():
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
    phases: tuple[str, ...] | Callable[[ConfigPoint], tuple[str, ...]],
    numbered: tuple[int, int] | None = None,
) -> Iterator[tuple[ConfigPoint, Iterable[int]]]:
    """Each configuration with repetitions still to measure, and those repetitions; one
    whose every phase (`phases`, or `phases(point)`) of every repetition is on disk is
    skipped (a resumed run). With --adaptive the repetitions come lazily: the pilot's,
    then, once rank 0 has decided how many the configuration needs, the rest
    (adaptive_todo); a loop consumes them with `for rep in todo`. The
    progress beacon is told which configuration of how many is under way: of `configs`,
    or, for a figure that walks several lists (fig4: FSDP then pipeline), `numbered`
    = (configurations before this list, configurations of the figure)."""
    before, total = numbered or (0, len(configs))
    for k, point in enumerate(configs, before + 1):
        where = {"config_k": k, "config_n": total, "config_id": point.config_id}
        ctx.progress(f"{point.config_id}: set-up", **where, rep_k=None, phase=None, phase_k=None)
        mine = phases(point) if callable(phases) else phases
        ctx.decided = None
        todo = adaptive_todo(ctx, point.config_id, mine) if ctx.options.adaptive else None
        todo = _missing(ctx, point.config_id, mine, range(ctx.reps)) if todo is None else todo
        if todo:
            yield point, todo
        else:
            n = ctx.decided or ctx.reps
            log.info("%s: all %d repetitions on disk, skipped", point.config_id, n)


def _missing(ctx: RunContext, config_id: str, phases: tuple[str, ...], reps) -> list[int]:
    return [r for r in reps if not rep_done(ctx, config_id, phases, r)]


def adaptive_todo(ctx: RunContext, config_id: str, phases: tuple[str, ...]) -> Iterable[int]:
    """An adaptive configuration's repetitions still to run: a list where its decision
    is known (stopping.json, or a pilot already on disk: decided now), else the pilot's
    missing repetitions followed, lazily, by the decision and the rest."""
    n = broadcast(stored_n(ctx, config_id) if ctx.is_writer else None)
    if n is None and ctx.reps > adaptive.PILOT:
        pilot = _missing(ctx, config_id, phases, range(adaptive.PILOT))
        if pilot:
            return _pilot_then_rest(ctx, config_id, phases, pilot)
    ctx.decided = n or decide(ctx, config_id)
    return _missing(ctx, config_id, phases, range(ctx.decided))


def _pilot_then_rest(ctx, config_id: str, phases: tuple[str, ...], pilot: list[int]) -> Iterator[int]:  # fmt: skip
    yield from pilot
    n = decide(ctx, config_id)
    yield from _missing(ctx, config_id, phases, range(adaptive.PILOT, n))


def stored_n(ctx: RunContext, config_id: str, figure: str | None = None) -> int | None:
    """The repetitions decided for `config_id` of `figure` (default: this run's) on disk;
    None where there is no decision, or it was for another maximum (an extended plan:
    decided again from the same pilot)."""
    decision = ctx.store.read_stopping(figure or ctx.figure, config_id)
    return decision["n"] if decision and decision.get("max") == ctx.reps else None


def decide(ctx: RunContext, config_id: str) -> int:
    """Rank 0 decides from the pilot's records and writes stopping.json; every rank gets
    the repetitions (an error on rank 0 stops every rank, none waits for a broadcast)."""
    got: int | str | None = None
    if ctx.is_writer:
        try:
            records = ctx.store.records(ctx.figure, config_id)
            decision = adaptive.decide(records, ctx.figure, ctx.reps)
            ctx.store.write_stopping(ctx.figure, config_id, decision)
            log.info("%s: %s", config_id, adaptive.shown(decision))
            got = decision["n"]
        except Exception as e:
            broadcast(f"{type(e).__name__}: {e}")
            raise
    got = broadcast(got)
    if isinstance(got, str):
        raise RuntimeError(f"rank 0 could not decide {config_id}'s repetitions: {got}")
    ctx.decided = int(got)
    return ctx.decided


def log_repetition(ctx: RunContext, config_id: str, rep: int, results: dict) -> None:
    """Rank 0's line a repetition, for the log file (the console shows the digest)."""
    if not ctx.is_writer:
        return
    over, seq = results["overlap"], results["sequential"]
    mfu = f", MFU {over['mfu']:.3f}" if "mfu" in over else ""
    log.info(
        "%s rep %d/%d: overlap %.3f ms, sequential %.3f ms%s",
        *(config_id, rep + 1, ctx.decided or ctx.reps, over["e2e_ms"], seq["e2e_ms"], mfu),
    )


class StopRequested(Exception):
    """The user pressed Ctrl-C once: stop at a repetition boundary, everything finished kept."""


def stop_requested(ctx: RunContext) -> None:
    """Raise StopRequested on every rank when the CLI asked to stop (a first Ctrl-C writes
    OUT/logs/<figure>.stop); checked between repetitions, so none is left half-measured."""
    asked = (ctx.store.root / "logs" / f"{ctx.figure}.stop").exists() if ctx.is_writer else None
    if broadcast(asked):
        raise StopRequested()


def record_not_run(ctx: RunContext, config_id: str, reason: str) -> None:
    """A configuration that cannot run here: logged, and recorded in the figure's status."""
    log.warning("%s: not run: %s", config_id, reason)
    if ctx.is_writer:
        ctx.store.write_config_status(ctx.figure, config_id, "not run", reason)


def check_gpu_alone(ctx: RunContext) -> None:
    """After each configuration: no other job has started on our GPUs meanwhile (its
    load would enter every number). Every rank looks at its own GPU and all agree."""
    ours = set(gather(os.getpid()))
    gpu = {ctx.gpu_index: ctx.power_backend}
    mine = procs.other_gpu_processes(gpu, ours, visible_only=True)
    found = [p for rank in gather(mine) for p in rank]
    procs.refuse_shared(found, allow=os.environ.get(procs.ALLOW_SHARED_ENV) == "1")


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


# Settling (docs/measurement.md, "Passes"): the last SETTLE_LAST iterations' step times,
# and SM clocks where there is telemetry, within SETTLE_SPREAD of their median.
SETTLE_LAST = 3
SETTLE_SPREAD = 0.05
# An iteration is an outlier where it lies more than OUTLIER_MADS scaled MADs from the
# median, and more than OUTLIER_FLOOR of it (a tight pass must not flag 1 % wobbles).
OUTLIER_MADS = 5.0
OUTLIER_FLOOR = 0.05


def _sm_clock_mhz(backend: power.Backend) -> float:
    return float(backend.read()[power.FIELDS.index("sm_clock_mhz")])


def _steady(values: list[float]) -> bool:
    last = [v for v in values[-SETTLE_LAST:] if np.isfinite(v)]
    if not last:
        return True  # nothing to judge by (no telemetry): the step times decide
    mid = float(np.median(last))
    return len(last) == SETTLE_LAST and (max(last) - min(last)) <= SETTLE_SPREAD * mid


def settle(ctx: RunContext, step: Callable[[], None], what: str) -> dict[str, float]:
    """Run `step` until the GPU is in the phase's own steady state: at least the preset's
    warm-up iterations and settle_min_s, then until the last iterations' step times and
    SM clocks agree, at most settle_max_s. Every rank runs the same iterations (a step
    may hold collectives): they stop together once all are steady or one is out of time."""
    p, times, clocks = ctx.preset, [], []
    t0 = time.perf_counter()
    while True:
        ctx.progress(f"{what}: settling")
        ctx.barrier()
        times.append(timed(step, ctx.device))
        clocks.append(_sm_clock_mhz(ctx.power_backend))
        elapsed = time.perf_counter() - t0
        steady = _steady(times) and _steady(clocks)
        enough = len(times) >= max(1, ctx.warmup) and elapsed >= p.settle_min_s
        votes = gather((enough and steady, elapsed >= p.settle_max_s))
        if all(v[0] for v in votes) or any(v[1] for v in votes):
            break
    return {
        "settle_s": elapsed,
        "settle_iters": float(len(times)),
        "settled": float(all(v[0] for v in votes)),
        "step_s": float(np.median(times[-SETTLE_LAST:])),
    }


def settle_rounds(
    ctx: RunContext, steps: dict[str, Callable[[], None]], what: str
) -> dict[str, float]:
    """Rounds of every phase until the SM clock is steady over the last three iterations
    (step times differ between phases by design, so only the clock is judged): at least
    one round and settle_min_s, at most settle_max_s. All ranks stop together."""
    p, clocks, rounds = ctx.preset, [], 0
    t0 = time.perf_counter()
    while True:
        ctx.progress(f"{what}: settling")
        r0 = time.perf_counter()
        for step in steps.values():
            ctx.barrier()
            step()
            synchronize(ctx.device)
            clocks.append(_sm_clock_mhz(ctx.power_backend))
        round_s, rounds = time.perf_counter() - r0, rounds + 1
        elapsed = time.perf_counter() - t0
        votes = gather((elapsed >= p.settle_min_s and _steady(clocks), elapsed >= p.settle_max_s))
        if all(v[0] for v in votes) or any(v[1] for v in votes):
            break
    return {
        "settle_s": elapsed,
        "settle_iters": float(rounds * len(steps)),
        "settled": float(all(v[0] for v in votes)),
        "step_s": round_s / len(steps),
    }


def timed_iterations(ctx: RunContext, step_s: float, min_iters: int, min_s: float) -> int:
    """Iterations of the timed pass: at least `min_iters` and `min_s` seconds at the settled
    step time, the same on every rank (the largest any rank asks for)."""
    wanted = max(min_iters, math.ceil(min_s / max(step_s, 1e-6)))
    return int(max(gather(wanted)))


def outliers(e2e: list[float]) -> int:
    """Iterations far from the pass's median (a stall, a hiccup of the host)."""
    x = np.asarray(e2e, dtype=float)
    if x.size < 3:
        return 0
    med = np.median(x)
    mad = 1.4826 * np.median(np.abs(x - med))
    return int(np.sum(np.abs(x - med) > max(OUTLIER_MADS * mad, OUTLIER_FLOOR * med)))


def _window_metrics(
    w: telemetry.WindowPower, iters: int, tdp: float, with_power: bool
) -> dict[str, list[float]]:
    """What the sampler saw over the timed pass: the SM clock always, power where the
    phase asked for a power window."""
    values = {"sm_clock_mean_mhz": w.sm_clock_mean_mhz}
    if with_power:
        values |= {
            "power_mean_w": w.mean_w,
            "power_peak_w": w.peak_w,
            "power_polled_mean_w": w.polled_mean_w,
            "power_mean_pct_tdp": 100 * w.mean_w / tdp,
            "power_peak_pct_tdp": 100 * w.peak_w / tdp,
            "energy_per_iter_j": w.energy_j / iters,
            "power_resolution_ms": w.resolution_s * 1e3,
            "energy_resolution_ms": w.energy_resolution_s * 1e3,
            "power_window_s": w.seconds,
        }
    return {k: [v] for k, v in values.items()}


class Meter(Protocol):
    """What a workload times itself over a timed pass (timing.SpanTimer)."""

    def begin(self) -> None: ...

    def end(self) -> dict[str, list[float]]: ...


def timed_pass(
    ctx: RunContext,
    step: Callable[[], None],
    n: int,
    what: str,
    with_power: bool,
    meter: Meter | None = None,
) -> tuple[list[float], dict[str, list[float]]]:
    """`n` iterations queued back to back after one barrier, each timed between marks on
    the current stream (seconds), and what was seen meanwhile: the meter's per-iteration
    lists, and with telemetry the power sampler's (the clock; power if asked).

    Queued, not each from an idle device: a power-limited GPU that idles while the host
    queues an iteration's first kernel runs the rest at a higher clock, and the host's
    share differs by mode (sequential calls the collective first), so idle-to-idle
    timing biased V1 (docs/measurement.md, protocol item 6). A step joins its side
    streams before it returns, so their work is inside its marks."""
    monitor = power.PowerMonitor(ctx.power_backend, ctx.power_interval_s)
    iterations = SpanTimer(ctx.device, "e2e_ms")
    ctx.barrier()
    synchronize(ctx.device)
    if meter is not None:
        meter.begin()
    with gc_paused(), monitor:
        monitor.begin_window(what)
        iterations.begin()
        for i in range(n):
            ctx.progress(f"{what}: timed iteration {i + 1}/{n}")
            iterations.next_iteration()
            with iterations.span():
                step()
        e2e = [ms / 1e3 for ms in iterations.end()["e2e_ms"]]  # waits for the device
        window = monitor.end_window(what)
    seen = meter.end() if meter is not None else {}
    if window is None:
        return e2e, seen
    tdp = ctx.power_backend.power_limit_w()
    return e2e, seen | _window_metrics(window.power, n, tdp, with_power)


# The sampler runs this long after an interleaved pass's last iteration, so the energy
# counter refreshes once past it (power.energy_at interpolates between refreshes).
COUNTER_TAIL_S = 0.25


def interleaved_timed_pass(
    ctx: RunContext,
    steps: dict[str, Callable[[], None]],
    rep: int,
    what: str,
    least: int,
    seconds: float,
    with_power: bool,
    most: int = 0,
    target_se: float = 0.0,
) -> tuple[dict[str, dict[str, list[float]]], dict[str, float]]:
    """Every phase's timed iterations in rounds (docs/measurement.md, "Interleaved timed
    rounds"): each round runs every phase once, in a row of the Williams design (round r
    of repetition `rep` takes row rep + r), so a slow spell of the host or the GPU that
    lasts seconds falls on every phase alike. Rounds first settle (the preset's bounds;
    at least one round), then run until each phase has at least `least` iterations and
    `seconds` of its own, and on up to `most` rounds while some phase's round-adjusted
    median is less precise than `target_se` (relative standard error, `rounds_precise`):
    a host whose steps jitter (ZeRO-3's) gets more rounds. With telemetry the sampler covers the whole pass and each
    phase's power and clock come from its own iterations (telemetry.intervals_power).

    Returns each phase's lists (E2E of its iteration in each round, what the sampler saw)
    and the settling numbers."""
    phases = tuple(steps)
    monitor = power.PowerMonitor(ctx.power_backend, ctx.power_interval_s)
    e2e: dict[str, list[float]] = {p: [] for p in phases}
    spans: dict[str, list[tuple[int, int]]] = {p: [] for p in phases}
    ctx.barrier()
    with gc_paused(), monitor:
        monitor.begin_window(what)
        settled = settle_rounds(ctx, steps, what)
        rounds = timed_iterations(ctx, settled.pop("step_s"), least, seconds)
        r = 0
        while r < rounds or (r < most and not _everywhere(rounds_precise(e2e, target_se))):
            ctx.progress(
                f"{what}: timed round {r + 1}/{max(rounds, most) if r >= rounds else rounds}"
            )
            for phase in balanced_order(phases, rep + r):
                ctx.barrier()
                t0 = time.time_ns()
                e2e[phase].append(timed(steps[phase], ctx.device) * 1e3)
                spans[phase].append((t0, time.time_ns()))
            r += 1
        rounds = r
        if monitor.telemetry:
            time.sleep(COUNTER_TAIL_S)
        window = monitor.end_window(what)
    out = {p: {"e2e_ms": e2e[p]} for p in phases}
    if window is not None:  # each phase's power from its own iterations in the window
        tdp = ctx.power_backend.power_limit_w()
        for p in phases:
            w = telemetry.intervals_power(window.samples, spans[p])
            out[p] |= _window_metrics(w, rounds, tdp, with_power)
    return out, settled


def _shares(e2e: dict[str, list[float]]) -> np.ndarray:
    """Each phase's iterations (rows) as shares of their round's mean over phases, times
    the median round mean."""
    n = min(len(v) for v in e2e.values())
    t = np.array([v[:n] for v in e2e.values()], dtype=float)
    level = t.mean(axis=0)
    return t / level * np.median(level)


def round_adjusted(e2e: dict[str, list[float]]) -> dict[str, tuple[float, int]]:
    """Each phase's E2E from interleaved rounds, and its outlying iterations: the median
    over rounds of its iteration's share of the round (the round's mean over phases),
    times the median round mean. A round is a block: what slows a whole round (the
    host's slow spells) cancels in the shares, so phases are compared within rounds."""
    scaled = _shares(e2e)
    return {
        p: (float(np.median(scaled[i])), outliers(scaled[i].tolist())) for i, p in enumerate(e2e)
    }


def rounds_precise(e2e: dict[str, list[float]], target_se: float) -> bool:
    """Whether every phase's round-adjusted median has a relative standard error of at
    most `target_se`: 1.2533 x (IQR / 1.349) / sqrt(rounds), the median's large-sample
    error with the interquartile range for the spread. Not the MAD: where most steps are
    equally fast and a third stall (ZeRO-3's), the MAD reads 0 and the IQR does not."""
    if min((len(v) for v in e2e.values()), default=0) < 3:
        return False
    scaled = _shares(e2e)
    q1, med, q3 = np.quantile(scaled, [0.25, 0.5, 0.75], axis=1)
    se = 1.2533 * (q3 - q1) / 1.349 / np.sqrt(scaled.shape[1]) / med
    return bool(np.all(se <= target_se))


def _everywhere(ok: bool) -> bool:
    """True on every rank only where it is true on every rank (one decision for all)."""
    return bool(min(gather(int(ok))))


def measure_phase(
    ctx: RunContext,
    step: Callable[[], None],
    *,
    trace_name: str,
    keep_trace: bool,
    comm: tuple[str, ...] = ("communication",),
    iters: int | None = None,
    timed_iters: int | None = None,
    timed_s: float | None = None,
    power_window_s: float | None = None,
    meter: Meter | None = None,
) -> dict[str, list[float]]:
    """This rank's per-iteration numbers for one phase (see the module docstring).

    `iters` overrides the preset's profiled iterations, `timed_iters` and `timed_s` the
    timed pass's least iterations and seconds (slow FP32 configurations, large sweeps),
    `power_window_s` the preset's power window (0: no power numbers; the timed pass lasts
    at least that long). A `meter`'s lists from the timed pass take the place of the
    profiled pass's of the same name, which stay beside them as `<name>_profiled`
    (`compute_ms` -> `compute_profiled_ms`)."""
    p = ctx.preset
    iters = iters or ctx.iters
    window = p.power_window_s if power_window_s is None else power_window_s
    if ctx.device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(ctx.device)
    settled = settle(ctx, step, trace_name)
    least = timed_iters or p.timed_min_iters or iters
    seconds = max(p.timed_min_s if timed_s is None else timed_s, window)
    n = timed_iterations(ctx, settled.pop("step_s"), least, seconds)
    e2e, seen = timed_pass(ctx, step, n, trace_name, with_power=window > 0, meter=meter)
    ctx.barrier()
    profiled = profiled_pass(ctx, step, trace_name, keep_trace, comm, iters)
    for key in seen.keys() & profiled.keys():
        profiled[profiled_name(key)] = profiled.pop(key)
    out = {
        "e2e_ms": [t * 1e3 for t in e2e],
        **profiled,
        **{k: [v] for k, v in settled.items()},
        **seen,
    }
    if ctx.device.type == "cuda":
        out["peak_memory_gib"] = [torch.cuda.max_memory_allocated(ctx.device) / GIB]
    return out


def profiled_name(key: str) -> str:
    """The name a profiled metric keeps where a meter of the timed pass gives its own."""
    stem, _, unit = key.rpartition("_")
    return f"{stem}_profiled_{unit}"


def profiled_pass(
    ctx: RunContext,
    step: Callable[[], None],
    trace_name: str,
    keep_trace: bool,
    comm: tuple[str, ...],
    iters: int,
) -> dict[str, list[float]]:
    """`iters` iterations under torch.profiler, each marked, parsed into the kernel table:
    per-iteration compute, communication and memory time, the overlap fraction and the
    device's span of the iteration (and V2's injected delay where there is one)."""
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
        trace = _export_trace(prof, path)
        table = kernels.kernel_table(trace)
    per_iter = kernels.per_iteration(table, iters, comm)
    out = {
        "compute_ms": (per_iter["compute_us"] / 1e3).tolist(),
        "communication_ms": (per_iter["communication_us"] / 1e3).tolist(),
        "memory_ms": (per_iter["memory_us"] / 1e3).tolist(),
        "overlap_fraction": per_iter["overlap_fraction"].tolist(),
        # E2E of the profiled pass as the device saw it: E2E / this shows whether the
        # timed and the profiled passes ran alike (Eq. 4 mixes the two)
        "profiled_span_ms": (per_iter["span_us"] / 1e3).tolist(),
    }
    if per_iter["delay_us"].any():  # only V2 injects a delay; other records stay as they were
        out["delay_ms"] = (per_iter["delay_us"] / 1e3).tolist()
    return out


def _export_trace(prof, path: Path) -> dict:
    """Export under a hidden temporary name, read it back whole, then rename: a kill or a
    full disk never leaves a truncated trace under its final name. The read is the check:
    kineto's writer says nothing when the disk fills (a 12 KiB invalid trace was renamed
    into place on a full disk), so a trace that does not parse is a full disk's doing."""
    from artifact.store import NoSpace, free_bytes

    tmp_path = path.with_name(f".{path.name}.tmp")
    try:
        try:
            prof.export_chrome_trace(str(tmp_path))
            trace = kernels.load_trace(tmp_path)
        except (OSError, ValueError) as e:
            written = tmp_path.stat().st_size if tmp_path.exists() else 0
            raise NoSpace(
                f"cannot write the trace '{path}' ({getattr(e, 'strerror', None) or 'cut short'} "
                f"after {written} bytes, {free_bytes(path.parent)} bytes free): free some "
                "space and re-run (finished repetitions are kept)"
            ) from None
        os.replace(tmp_path, path)
    finally:
        tmp_path.unlink(missing_ok=True)
    return trace


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


def _nanmean(values) -> float:
    """Mean ignoring NaN (the overlap fraction of a phase without communication); NaN if all are."""
    x = np.asarray(values, dtype=float)
    x = x[~np.isnan(x)]
    return float(x.mean()) if x.size else float("nan")


def reduce_ranks(
    per_rank: dict[str, list[float]],
) -> tuple[dict[str, float], list[dict] | None, list[float]]:
    """Gather every rank's per-iteration lists; rank 0 gets (metrics, per-rank means, E2E
    of each timed iteration).

    An iteration's E2E is the slowest rank's; the phase's E2E is the median iteration,
    with the count of outlying iterations beside it (`e2e_outliers`). Kernel times and
    the overlap fraction are means over iterations and ranks; `settled` is 1 only where
    every rank settled. Other ranks get ({}, None, []).
    """
    gathered = gather(per_rank)
    if dist.is_initialized() and dist.get_rank() != 0:
        return {}, None, []
    metrics: dict[str, float] = {}
    n = min(len(g.get("e2e_ms", [])) for g in gathered)
    e2e = np.max([g["e2e_ms"][:n] for g in gathered], axis=0) if n else np.array([])
    for key in per_rank:
        if key in MAX_OVER_RANKS:
            metrics[key] = float(np.nanmax(np.concatenate([g[key] for g in gathered])))
        elif key == "settled":
            metrics[key] = float(min(g[key][0] for g in gathered))
        elif key == "e2e_ms":
            metrics[key] = float(np.median(e2e))
            metrics["e2e_outliers"] = float(outliers(e2e.tolist()))
            metrics["timed_iters"] = float(n)
        else:
            metrics[key] = _nanmean(np.concatenate([g[key] for g in gathered]))
    per_rank_means = [{k: _nanmean(v) for k, v in g.items()} for g in gathered]
    return metrics, per_rank_means, [round(float(t), 4) for t in e2e]


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
    timed_iters: int | None = None,
    timed_s: float | None = None,
    interleave: bool = False,
    timed_rounds_max: int = 0,
    meter: Meter | None = None,
) -> dict[str, dict[str, float]]:
    """One repetition: every phase settled, timed (under the power sampler where there is
    telemetry) and profiled, in the given order; rank 0 then writes one record a phase,
    with the E2E of each timed iteration. The A/A repeat (modes.OVERLAP_REPEAT) keeps no
    trace. With `interleave` (training) the phases are timed together in interleaved
    rounds first (`interleaved_timed_pass`), and then each is profiled after one
    iteration of its own. (Over 60 lines, on purpose: the whole protocol of a repetition,
    docs/design.md section 3, reads top to bottom here; most of the length is its
    keyword arguments.)

    `per_rank_extra(phase)` adds this rank's own lists (a loss) before ranks are reduced;
    `finish(phase, metrics)` adds what follows from the reduced metrics (MFU, bandwidth).
    `power_window_s` overrides the preset's power window (0: no power numbers), `iters`
    its profiled iterations, `timed_iters` and `timed_s` the timed pass's least
    iterations and seconds, `timed_rounds_max` the most interleaved rounds (while the
    medians are less precise than the preset's `timed_rounds_se`), `meter` what the
    workload times itself over each phase's timed pass (not with `interleave`).
    Returns the metrics by phase (empty dicts on ranks other than 0).
    """
    p = ctx.preset
    if interleave and meter is not None:
        raise ValueError("a meter times per-phase passes; interleaved rounds take none")
    timed_by_phase: dict[str, dict[str, list[float]]] = {}
    if interleave:
        window = p.power_window_s if power_window_s is None else power_window_s
        if ctx.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(ctx.device)
        ctx.progress(f"{config_id}: interleaved rounds", **ctx.rep_fields(rep), phase="all")
        timed_by_phase, settled = interleaved_timed_pass(
            ctx,
            {phase: step_of(phase) for phase in phases},
            rep,
            config_id,
            least=timed_iters or p.timed_min_iters or iters or ctx.iters,
            seconds=max(p.timed_min_s if timed_s is None else timed_s, window),
            with_power=window > 0,
            most=timed_rounds_max,
            target_se=p.timed_rounds_se,
        )
        for lists in timed_by_phase.values():
            lists |= {k: [v] for k, v in settled.items()}
    profiled_n = iters or ctx.iters
    if interleave and p.profiled_min_s:  # sized by the timed step (Preset.profiled_iters)
        step_s = float(np.median([x for v in timed_by_phase.values() for x in v["e2e_ms"]])) / 1e3
        profiled_n = int(max(gather(p.profiled_iters(step_s, profiled_n))))  # one for all ranks
    results = {}
    for k, phase in enumerate(phases, 1):
        where = {**ctx.rep_fields(rep), "phase_k": k, "phase_n": len(phases)}
        ctx.progress(f"{config_id}: {phase}", **where, phase=phase)
        keep_trace = rep == 0 and phase != OVERLAP_REPEAT
        if interleave:
            step_of(phase)()  # the mode switched in before its kernels are profiled
            ctx.barrier()
            profiled = profiled_pass(
                ctx, step_of(phase), f"{config_id}-{phase}", keep_trace, comm, profiled_n
            )
            per_rank = timed_by_phase[phase] | profiled | {"profiled_iters": [float(profiled_n)]}
            if ctx.device.type == "cuda":
                per_rank["peak_memory_gib"] = [torch.cuda.max_memory_allocated(ctx.device) / GIB]
        else:
            per_rank = measure_phase(
                ctx,
                step_of(phase),
                trace_name=f"{config_id}-{phase}",
                keep_trace=keep_trace,
                comm=comm,
                iters=iters,
                timed_iters=timed_iters,
                timed_s=timed_s,
                power_window_s=power_window_s,
                meter=meter,
            )
        if per_rank_extra is not None:
            per_rank |= per_rank_extra(phase)
        results[phase] = reduce_ranks(per_rank)
    if not ctx.is_writer:
        return {phase: {} for phase in phases}
    if interleave:  # phases compared within rounds (round_adjusted)
        adjusted = round_adjusted({phase: e2e for phase, (_, _, e2e) in results.items()})
        for phase, (m, _, _) in results.items():
            m["e2e_ms"], m["e2e_outliers"] = adjusted[phase][0], float(adjusted[phase][1])
    design = {"timed": "interleaved rounds" if interleave else "per phase"}
    for k, (phase, (m, per_rank_means, e2e)) in enumerate(results.items()):
        if finish is not None:
            m |= finish(phase, m)
        ctx.store.write_record(
            figure=ctx.figure,
            config_id=config_id,
            config=config,
            mode=phase,
            rep=rep,
            metrics=m,
            units=units,
            provenance=ctx.provenance,
            extra={
                "per_rank": per_rank_means,
                "e2e_iterations_ms": e2e,
                "phase_position": k,  # its place in this repetition's order (0: first)
                "phase_order": list(phases),
                **design,
                **ctx.record_extra(),
                **(extra or {}),
            },
        )
    return {phase: m for phase, (m, _, _) in results.items()}
