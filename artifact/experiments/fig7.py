"""Fig. 7: a power trace normalised to TDP, split by what the kernels were doing.

The paper shows MI250 power during LLaMA2-13B training. Here, for the microbenchmark:
one profiled window in which the phases run in blocks (overlap, compute alone,
communication alone, sequential), each block several times longer than the telemetry's
refresh interval, while the sampler polls. Every sample is labelled with the kernel
timeline's state over the interval it stands for (overlap / compute_only / comm_only /
idle; artifact.measure.telemetry.label_samples), and each block's power window gives its
mean power from the energy counter (measure.power.PowerMonitor).

Per repetition: mean instant power per state and counter mean per block, as % of TDP.
Repetition 0's labelled series goes to OUT/traces/fig7/<config>-power.csv (time
normalised to the window, power to TDP), which the report plots.
"""

from __future__ import annotations

import logging
import math
import tempfile
import time
from pathlib import Path

import numpy as np
from torch.profiler import profile

from artifact.core.phases import FIG7_BLOCKS as BLOCKS
from artifact.core.phases import FIG7_MIN_BLOCK_S as MIN_BLOCK_S
from artifact.experiments import fig6, fig8
from artifact.measure import kernels, power, telemetry
from artifact.measure.timing import synchronize
from artifact.rank.runner import (
    RunContext,
    gather,
    pending,
    profiler_activities,
    reduce_ranks,
    stop_requested,
)
from artifact.store import atomic_write_text
from artifact.workloads.microbench import Microbench

log = logging.getLogger(__name__)


def _units() -> dict[str, str]:
    u = {f"power_{s}_pct_tdp": "%" for s in telemetry.STATES}
    u |= {f"block_{b}_pct_tdp": "%" for b in BLOCKS}
    u |= {"samples": "count", "power_resolution_ms": "ms", "window_s": "s"}
    u |= {"block_refreshes": "count"}
    return u


def block_iterations(
    ctx: RunContext, bench: Microbench, block_s: float, clock=time.perf_counter
) -> dict[str, int]:
    """How many iterations of each block fill `block_s`, from one timed iteration, the
    most any rank needs. Every rank runs exactly as many: a rank that timed its own block
    would issue a collective its peers had stopped issuing, and wait for them forever
    (4 NCCL ranks sharing one GPU hung so)."""
    counts = {}
    for block in BLOCKS:
        synchronize(ctx.device)
        start = clock()
        bench.run_phase(block)
        synchronize(ctx.device)
        took = max(clock() - start, 1e-6)
        counts[block] = max(gather(max(1, math.ceil(block_s / took))))
    return counts


def _trace_window(ctx: RunContext, bench: Microbench, block_s: float):
    """Run the blocks under the profiler, in a power window that holds one window a
    block; (kernel table, the trace's base, the whole window, each block's window)."""
    monitor = power.PowerMonitor(ctx.power_backend, ctx.power_interval_s)
    blocks, counts = {}, block_iterations(ctx, bench, block_s)
    with tempfile.TemporaryDirectory() as tmp:
        with profile(activities=profiler_activities(ctx.device)) as prof, monitor:
            monitor.begin_window("trace")
            i = 0
            for block in BLOCKS:
                ctx.barrier()
                monitor.begin_window(block)
                for _ in range(counts[block]):
                    with kernels.iteration_marker(i):
                        bench.run_phase(block)
                    i += 1
                synchronize(ctx.device)
                blocks[block] = monitor.end_window(block)
            whole = monitor.end_window("trace")
        path = Path(tmp) / "trace.json"
        prof.export_chrome_trace(str(path))
        trace = kernels.load_trace(path)
    return kernels.kernel_table(trace), telemetry.trace_base_ns(trace), whole, blocks


def _window_metrics(whole, table, base_ns, blocks, comm, tdp: float):
    """One window's metrics (% of TDP per kernel state and per block), and its samples'
    power and state labels."""
    samples = whole.samples
    resolution = telemetry.effective_resolution_s(samples, "power_instant_w")
    labels = telemetry.label_samples(samples, table, base_ns, comm, lookback_s=resolution)
    inst = samples["power_instant_w"].fillna(samples["power_w"])
    m = {
        f"power_{s}_pct_tdp": [100 * float(inst[labels == s].mean()) / tdp]
        for s in telemetry.STATES
    }
    for block, window in blocks.items():
        m[f"block_{block}_pct_tdp"] = [100 * window.power.mean_w / tdp]
    m["samples"] = [float(len(samples))]
    m["power_resolution_ms"] = [resolution * 1e3]
    # how many refreshes of the energy counter a block spans: the block means are
    # judged only where they resolve the blocks (expected/fig7.yaml)
    energy_s = telemetry.effective_resolution_s(samples, "energy_j")
    block_s = min(w.end_ns - w.start_ns for w in blocks.values()) / 1e9
    m["block_refreshes"] = [block_s / energy_s if energy_s > 0 else float("nan")]
    m["window_s"] = [(samples["t_ns"].iloc[-1] - samples["t_ns"].iloc[0]) / 1e9]
    return m, inst, labels


def _keep_series(ctx: RunContext, config_id: str, samples, inst, labels, tdp: float) -> None:
    """The labelled series the report plots: time normalised to the window, power to TDP."""
    t = samples["t_ns"].to_numpy(float)
    series = samples.assign(
        t_norm=(t - t[0]) / max(t[-1] - t[0], 1.0),
        power_pct_tdp=100 * inst / tdp,
        state=labels,
    )[["t_norm", "power_pct_tdp", "state", "t_ns"]]
    atomic_write_text(ctx.traces_dir / f"{config_id}-power.csv", series.to_csv(index=False))


def run(ctx: RunContext) -> None:
    if ctx.power_backend.name == "none":
        if ctx.is_writer:
            ctx.store.write_status(ctx.figure, "not run", fig6.NO_TELEMETRY)
        return
    tdp = ctx.power_backend.power_limit_w()
    # blocks of at least 0.5 s: 5 refresh intervals of NVML on an H200
    block_s = max(MIN_BLOCK_S, ctx.preset.power_window_s / 2)
    for (config_id, config, spec), todo in pending(ctx, fig8.configs_here(ctx), ("trace",)):
        bench = Microbench(spec, ctx.device, seed=ctx.rank)
        bench.calibrate(ctx.warmup)
        comm = ("memory",) if spec.comm == "copy" else ("communication",)
        for rep in todo:
            stop_requested(ctx)
            ctx.progress(f"{config_id}: power trace", **ctx.rep_fields(rep))
            table, base_ns, whole, blocks = _trace_window(ctx, bench, block_s)
            m, inst, labels = _window_metrics(whole, table, base_ns, blocks, comm, tdp)
            metrics, per_rank, _ = reduce_ranks(m)
            if rep == 0 and ctx.rank == 0 and ctx.traces_dir is not None:
                _keep_series(ctx, config_id, whole.samples, inst, labels, tdp)
            if ctx.is_writer:
                ctx.store.write_record(
                    figure=ctx.figure,
                    config_id=config_id,
                    config={**config, "block_s": block_s},
                    mode="trace",
                    rep=rep,
                    metrics=metrics,
                    units=_units(),
                    provenance=ctx.provenance,
                    extra={
                        "per_rank": per_rank,
                        "power": {"backend": ctx.power_backend.name, "tdp_w": tdp},
                        **ctx.record_extra(),
                    },
                )
            log.info(
                "%s rep %d: %s",
                config_id,
                rep,
                {k: round(v, 1) for k, v in metrics.items() if not np.isnan(v)},
            )
    if ctx.is_writer:
        ctx.store.write_status(ctx.figure, "ran", f"power from {ctx.power_backend.name}")
