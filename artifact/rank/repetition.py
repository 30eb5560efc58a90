"""One repetition of one configuration (docs/design.md section 3): every phase settled,
timed and profiled, the ranks' numbers reduced on rank 0, which writes one record a phase
(docs/design.md section 5)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from artifact.rank.context import RunContext, gather
from artifact.rank.modes import OVERLAP_REPEAT
from artifact.rank.profiled import profiled_name, profiled_pass
from artifact.rank.timed import (
    Meter,
    interleaved_timed_pass,
    outliers,
    round_adjusted,
    settle,
    timed_iterations,
    timed_pass,
)

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
    # GPU traces only (artifact.measure.kernels.footprints): what a CTA holds of an SM
    **{
        f"{who}_{name}": "bytes" if name.endswith("bytes") else "count"
        for who in ("compute", "comm")
        for name in ("grid_ctas", "threads_per_cta", "regs_per_thread", "smem_per_cta_bytes")
    },
    "holder_first_fraction": "ratio",
    "gpu_sms": "count",
    # the GEMM's CTAs an SM holds alone and beside one collective CTA (measure.occupancy)
    "compute_ctas_per_sm": "count",
    "compute_ctas_beside_comm": "count",
}
GIB = 1 << 30
# per-rank values reduced by their maximum (the rank that needs most), not their mean
MAX_OVER_RANKS = ("peak_memory_gib",)


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


@dataclass(frozen=True)
class Settings:
    """How one configuration's repetitions are measured, fixed for all of them (what
    changes a repetition, its number and its phase order, is measure_repetition's).

    `step_of(phase)` is the phase's step; `units` the records' units; `comm` the kernel
    categories in the communication role (a copy proxy's: memory). `per_rank_extra(phase)`
    adds this rank's own lists (a loss) before ranks are reduced; `finish(phase, metrics)`
    adds what follows from the reduced metrics (MFU, bandwidth); `extra` goes into every
    record. `power_window_s` overrides the preset's power window (0: no power numbers; the
    timed pass lasts at least that long), `iters` its profiled iterations, `timed_iters`
    and `timed_s` the timed pass's least iterations and seconds (slow FP32
    configurations, large sweeps). With `interleave` (training) the phases are timed
    together in interleaved rounds, at most `timed_rounds_max` (while the medians are less
    precise than the preset's `timed_rounds_se`), then each is profiled after one
    iteration of its own. `meter` is what the workload times itself over each phase's
    timed pass (not with `interleave`): its lists take the place of the profiled pass's
    of the same name, which stay beside them as `<name>_profiled` (`compute_ms` ->
    `compute_profiled_ms`)."""

    config_id: str
    config: dict[str, Any]
    step_of: Callable[[str], Callable[[], None]]
    units: dict[str, str]
    comm: tuple[str, ...] = ("communication",)
    per_rank_extra: Callable[[str], dict[str, list[float]]] | None = None
    finish: Callable[[str, dict[str, float]], dict[str, float]] | None = None
    extra: dict[str, Any] | None = None
    power_window_s: float | None = None
    iters: int | None = None
    timed_iters: int | None = None
    timed_s: float | None = None
    interleave: bool = False
    timed_rounds_max: int = 0
    meter: Meter | None = None

    def __post_init__(self):
        if self.interleave and self.meter is not None:
            raise ValueError("a meter times per-phase passes; interleaved rounds take none")

    def window_s(self, ctx: RunContext) -> float:
        """The power window: this configuration's, else the preset's."""
        return ctx.preset.power_window_s if self.power_window_s is None else self.power_window_s

    def least(self, ctx: RunContext) -> tuple[int, float]:
        """The timed pass's least iterations and seconds (at least the power window)."""
        p = ctx.preset
        iters = self.timed_iters or p.timed_min_iters or self.iters or ctx.iters
        seconds = p.timed_min_s if self.timed_s is None else self.timed_s
        return iters, max(seconds, self.window_s(ctx))


def _peak_memory(ctx: RunContext) -> dict[str, list[float]]:
    if ctx.device.type != "cuda":
        return {}
    return {"peak_memory_gib": [torch.cuda.max_memory_allocated(ctx.device) / GIB]}


def measure_phase(
    ctx: RunContext, s: Settings, phase: str, trace_name: str, keep_trace: bool
) -> dict[str, list[float]]:
    """This rank's per-iteration numbers for one phase, timed on its own: settled, timed
    (at least the settings' iterations and seconds), then profiled (runner's docstring)."""
    step, iters = s.step_of(phase), s.iters or ctx.iters
    if ctx.device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(ctx.device)
    settled = settle(ctx, step, trace_name)
    least, seconds = s.least(ctx)
    n = timed_iterations(ctx, settled.pop("step_s"), least, seconds)
    with_power = s.window_s(ctx) > 0
    e2e, seen = timed_pass(ctx, step, n, trace_name, with_power=with_power, meter=s.meter)
    ctx.barrier()
    profiled = profiled_pass(ctx, step, trace_name, keep_trace, s.comm, iters)
    for key in seen.keys() & profiled.keys():
        profiled[profiled_name(key)] = profiled.pop(key)
    out = {
        "e2e_ms": [t * 1e3 for t in e2e],
        **profiled,
        **{k: [v] for k, v in settled.items()},
        **seen,
    }
    return out | _peak_memory(ctx)


def _interleaved(
    ctx: RunContext, s: Settings, rep: int, phases: tuple[str, ...]
) -> tuple[dict[str, dict[str, list[float]]], int]:
    """Every phase timed in interleaved rounds: each phase's lists (with the settling
    numbers), and the iterations each then profiles, sized by the timed step
    (Preset.profiled_iters), one count for all ranks."""
    p = ctx.preset
    if ctx.device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(ctx.device)
    ctx.progress(f"{s.config_id}: interleaved rounds", **ctx.rep_fields(rep), phase="all")
    least, seconds = s.least(ctx)
    timed_by_phase, settled = interleaved_timed_pass(
        ctx,
        {phase: s.step_of(phase) for phase in phases},
        rep,
        s.config_id,
        least=least,
        seconds=seconds,
        with_power=s.window_s(ctx) > 0,
        most=s.timed_rounds_max,
        target_se=p.timed_rounds_se,
    )
    for lists in timed_by_phase.values():
        lists |= {k: [v] for k, v in settled.items()}
    profiled_n = s.iters or ctx.iters
    if p.profiled_min_s:  # sized by the timed step (Preset.profiled_iters)
        step_s = float(np.median([x for v in timed_by_phase.values() for x in v["e2e_ms"]])) / 1e3
        profiled_n = int(max(gather(p.profiled_iters(step_s, profiled_n))))
    return timed_by_phase, profiled_n


def _profiled_after_rounds(
    ctx: RunContext, s: Settings, phase: str, trace_name: str, keep_trace: bool, n: int
) -> dict[str, list[float]]:
    """One phase's profiled pass after the interleaved rounds: one step of its own first,
    so the mode is switched in before its kernels are profiled."""
    s.step_of(phase)()
    ctx.barrier()
    profiled = profiled_pass(ctx, s.step_of(phase), trace_name, keep_trace, s.comm, n)
    return profiled | {"profiled_iters": [float(n)]}


def measure_repetition(
    ctx: RunContext, s: Settings, rep: int, phases: tuple[str, ...]
) -> dict[str, dict[str, float]]:
    """One repetition: every phase settled, timed (under a power window where there is
    telemetry) and profiled, in the given order; rank 0 then writes one record a phase,
    with the E2E of each timed iteration. The A/A repeat (modes.OVERLAP_REPEAT) keeps no
    trace. With `s.interleave` (training) the phases are timed together first.
    Returns the metrics by phase (empty dicts on ranks other than 0)."""
    timed_by_phase, profiled_n = _interleaved(ctx, s, rep, phases) if s.interleave else ({}, 0)
    results = {}
    for k, phase in enumerate(phases, 1):
        where = {**ctx.rep_fields(rep), "phase_k": k, "phase_n": len(phases)}
        ctx.progress(f"{s.config_id}: {phase}", **where, phase=phase)
        trace_name = f"{s.config_id}-{phase}"
        keep_trace = rep == 0 and phase != OVERLAP_REPEAT
        if s.interleave:
            profiled = _profiled_after_rounds(ctx, s, phase, trace_name, keep_trace, profiled_n)
            per_rank = timed_by_phase[phase] | profiled | _peak_memory(ctx)
        else:
            per_rank = measure_phase(ctx, s, phase, trace_name, keep_trace)
        if s.per_rank_extra is not None:
            per_rank |= s.per_rank_extra(phase)
        results[phase] = reduce_ranks(per_rank)
    if not ctx.is_writer:
        return {phase: {} for phase in phases}
    if s.interleave:  # phases compared within rounds (round_adjusted)
        adjusted = round_adjusted({phase: e2e for phase, (_, _, e2e) in results.items()})
        for phase, (m, _, _) in results.items():
            m["e2e_ms"], m["e2e_outliers"] = adjusted[phase][0], float(adjusted[phase][1])
    _write_records(ctx, s, rep, phases, results)
    return {phase: m for phase, (m, _, _) in results.items()}


def _write_records(ctx: RunContext, s: Settings, rep: int, phases, results) -> None:
    """Rank 0's record a phase: the reduced metrics (and what `finish` adds), each rank's
    means, the E2E of each timed iteration, and where the phase stood in the order."""
    design = {"timed": "interleaved rounds" if s.interleave else "per phase"}
    for k, (phase, (m, per_rank_means, e2e)) in enumerate(results.items()):
        if s.finish is not None:
            m |= s.finish(phase, m)
        ctx.store.write_record(
            figure=ctx.figure,
            config_id=s.config_id,
            config=s.config,
            mode=phase,
            rep=rep,
            metrics=m,
            units=s.units,
            provenance=ctx.provenance,
            extra={
                "per_rank": per_rank_means,
                "e2e_iterations_ms": e2e,
                "phase_position": k,  # its place in this repetition's order (0: first)
                "phase_order": list(phases),
                **design,
                **ctx.record_extra(),
                **(s.extra or {}),
            },
        )
