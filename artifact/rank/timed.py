"""The timed pass (docs/design.md section 3, docs/measurement.md "Passes"): settling a
phase until the GPU is steady, then its iterations queued back to back and timed
between marks on the stream, under a power window where there is telemetry; training's
phases timed together in interleaved rounds, compared within rounds (round_adjusted)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Protocol

import numpy as np

from artifact.core.phases import balanced_order
from artifact.measure import power, telemetry
from artifact.measure.timing import SpanTimer, clock, gc_paused, synchronize, timed
from artifact.rank.context import RunContext, gather

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
    t0 = clock()
    while True:
        ctx.progress(f"{what}: settling")
        ctx.barrier()
        times.append(timed(step, ctx.device))
        clocks.append(_sm_clock_mhz(ctx.power_backend))
        elapsed = clock() - t0
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
    t0 = clock()
    while True:
        ctx.progress(f"{what}: settling")
        r0 = clock()
        for step in steps.values():
            ctx.barrier()
            step()
            synchronize(ctx.device)
            clocks.append(_sm_clock_mhz(ctx.power_backend))
        round_s, rounds = clock() - r0, rounds + 1
        elapsed = clock() - t0
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
    a host whose steps jitter (ZeRO-3's) gets more rounds. With telemetry one power window
    covers the whole pass and each phase's power and clock come from its own iterations
    (telemetry.intervals_power).

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
