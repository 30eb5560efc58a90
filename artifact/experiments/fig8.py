"""Fig. 8: power and performance of a 1 GiB all-reduce concurrent with matrix multiplication.

Reported per configuration: matmul kernel slowdown under overlap (Eq. 1), communication
slowdown, all-reduce algbw and busbw (nccl-tests: busbw = algbw * 2(n-1)/n), E2E for
overlap and sequential, the derived ideal (Eq. 4) and ConCCL's max-ideal, the sequential
penalty, V1 (sequential compute vs compute alone), and Eq. 1's noise floor (the A/A
repeat of the overlap phase; fig6, which reports power only, runs no repeat). Where the
all-reduce moves data between GPUs, the zero-byte controls run beside the modes.
Compute time (`compute_ms`, behind Eq. 1 and V1) is each phase's matmuls timed by CUDA
events over the whole timed pass (a second or more); the profiled pass's kernel sum,
which covers a tenth of a second and catches the power-limited clock's swings, stays
beside it as `compute_profiled_ms`.

With one GPU the all-reduce moves no data, so the experiment also runs two labelled
proxies (artifact.workloads.microbench): NCCL's one-rank reduction kernel (an AVG
all-reduce: SM-driven, like NCCL's kernels on several GPUs) and a device-to-device copy
(copy engine: bandwidth contention without SM contention). `--colocate W` adds W real
NCCL ranks co-located on the one GPU (artifact.rank.colocate; gloo on a CPU).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any

from artifact.core import traffic
from artifact.core.mechanisms import ONE_GPU_NOTES
from artifact.core.phases import OVERLAP_REPEAT, balanced_order, microbench_phases
from artifact.experiments import configs_of
from artifact.figures import runs_aa_repeat
from artifact.figures.sweeps import MicroPoint, Where
from artifact.measure.timing import timed
from artifact.rank.reuse import reuse
from artifact.rank.runner import (
    BASE_UNITS,
    POWER_UNITS,
    ConfigPoint,
    RunContext,
    Settings,
    check_gpu_alone,
    log_repetition,
    measure_repetition,
    pending,
    record_not_run,
    stop_requested,
)
from artifact.workloads.microbench import Microbench, MicrobenchSpec
from artifact.workloads.precision import dtype_of

log = logging.getLogger(__name__)

# controls run beside every mechanism that moves data or holds SMs: the real all-reduce
# between GPUs, and one GPU's SMs-held, stand-in and co-located rows
CONTROLLED = ("spin", "nccl-shaped", "coloc")
# the A/A repeat runs the microbenchmark's own overlap phase again
BENCH_PHASE = {OVERLAP_REPEAT: "overlap"}


UNITS = {
    **BASE_UNITS,
    **POWER_UNITS,
    "compute_profiled_ms": "ms",
    "comm_role_ms": "ms",
    "matmul_tflops": "TFLOP/s",
    "compute_GBps": "GB/s",
    "comm_algbw_GBps": "GB/s",
    "comm_busbw_GBps": "GB/s",
}


def config_point(where: Where, point: MicroPoint) -> ConfigPoint:
    """One configuration of the sweep (artifact.figures.sweeps.microbench) as the
    microbenchmark builds it, with the settings every record carries."""
    extra = {"ranks": point.ranks, "max_ctas": point.max_ctas} if point.comm == "coloc" else {}
    per_iter = where.preset.microbench.matmuls_per_iter
    spec = MicrobenchSpec(
        point.matmul_size, point.precision, point.comm_bytes, per_iter, point.comm, **extra
    )
    config = {
        "gpu": where.gpu or "cpu",
        "model": point.model,
        "parallelism": point.parallelism,
        "precision": point.precision,
        "world_size": where.world,
        "comm_bytes": point.comm_bytes,
        "matmuls_per_iter": per_iter,
        "comm": point.comm,
        "proxy": point.comm != "allreduce",
        "note": _note(point.comm, extra) if where.world == 1 else "",
        **extra,
    }
    return ConfigPoint(point.config_id, config, spec)


def _note(comm: str, extra: dict) -> str:
    if comm != "coloc":
        return ONE_GPU_NOTES[comm]
    return ONE_GPU_NOTES["coloc"].format(ctas=extra["max_ctas"] or "NCCL's", ranks=extra["ranks"])


def configs_here(ctx: RunContext) -> list[ConfigPoint]:
    """This figure's configurations here (its spec's sweep: fig6, fig7 and fig8 take
    sweeps.microbench), as the microbenchmark builds them."""
    where = Where.of(ctx)
    return [config_point(where, p) for p in configs_of(ctx)]


def _phase_metrics(
    m: dict[str, float], phase: str, spec: MicrobenchSpec, repeats: int, world: int
) -> dict[str, float]:
    """Add the microbenchmark's own metrics to one phase's base metrics."""
    m = dict(m)
    comm_ms = m["memory_ms"] if spec.comm == "copy" else m["communication_ms"]
    nan = float("nan")
    m["comm_role_ms"] = comm_ms if phase != "nocomm" else nan
    has_compute = phase != "comm_alone" and m["compute_ms"] > 0
    compute_s = m["compute_ms"] * 1e-3 if has_compute else nan
    m["matmul_tflops"] = (
        spec.unit_flops * spec.matmuls_per_iter / compute_s / 1e12
        if spec.compute == "gemm"
        else nan
    )
    # bytes the compute must move at least, over its kernel time: the memory-bound add's
    # achieved bandwidth, and how little a GEMM asks of memory
    m["compute_GBps"] = (
        spec.unit_bytes(dtype_of(spec.precision).itemsize) * spec.matmuls_per_iter / compute_s / 1e9
    )
    has_comm = phase != "nocomm" and comm_ms > 0
    algbw = spec.comm_bytes * repeats / (comm_ms * 1e-3) / 1e9 if has_comm else nan
    m["comm_algbw_GBps"] = algbw
    m["comm_busbw_GBps"] = algbw * traffic.busbw_factor(world) if world > 1 else nan
    return m


def run(ctx: RunContext) -> None:
    points = configs_here(ctx)
    if ctx.options.colocate and ctx.device.type == "cuda":
        from artifact.rank import colocate

        if why := colocate.refusal():  # the co-located rows cannot run: recorded, not hidden
            for p in [p for p in points if p.spec.comm == "coloc"]:
                record_not_run(ctx, p.config_id, why)
            points = [p for p in points if p.spec.comm != "coloc"]
    run_configs(ctx, points, prepare=functools.partial(with_nccl_choices, ctx, {}))


def with_nccl_choices(ctx: RunContext, seen: dict, point: ConfigPoint) -> ConfigPoint:
    """A co-located configuration with what NCCL chose for it (version, algorithm,
    protocol, channels: colocate.probe, once a size) in its records; others as they are."""
    spec = point.spec
    if spec.comm != "coloc" or ctx.device.type != "cuda":
        return point
    from artifact.rank import colocate

    key = (spec.ranks, spec.max_ctas, spec.comm_bytes)
    if key not in seen:
        seen[key] = colocate.probe(spec.ranks, spec.max_ctas or None, spec.comm_bytes)
    return ConfigPoint(point.config_id, {**point.config, **seen[key]}, spec)


def collective_ms(ctx: RunContext, spec: MicrobenchSpec) -> float:
    """One collective's time alone (ms, fastest of three, after a warm-up): the pace the
    stand-in's twin of co-located NCCL keeps."""
    bench = Microbench(spec, ctx.device, seed=ctx.rank)
    try:
        bench.calibrate(ctx.warmup, repeats=1)
        return min(timed(lambda: bench.run_phase("comm_alone"), ctx.device) for _ in range(3)) * 1e3
    finally:
        bench.close()


def _power_info(ctx: RunContext) -> dict[str, Any]:
    """How the records' power numbers were read (each record carries it)."""
    return {
        "backend": ctx.power_backend.name,
        "interval_s": ctx.power_interval_s,
        "limit_w": ctx.power_backend.power_limit_w(),
        "peak_from": "NVML_FI_DEV_POWER_INSTANT (polled power where absent)",
        "energy_from": "cumulative energy counter difference",
    }


def _phases_of(ctx: RunContext, point: ConfigPoint) -> tuple[str, ...]:
    """A configuration's phases: the modes, the A/A repeat where the figure derives the
    noise floor, and the controls where the collective moves data."""
    # the controls: only an all-reduce between GPUs moves data a claim is judged on
    # (a one-GPU proxy's control is the all-reduce row, which moves nothing)
    moves = (point.spec.comm == "allreduce" and ctx.world_size > 1) or (
        point.spec.comm in CONTROLLED
    )
    return microbench_phases(runs_aa_repeat(ctx.figure), moves)


def _settings(
    ctx: RunContext,
    point: ConfigPoint,
    bench: Microbench,
    count: int,
    comm_role: tuple[str, ...],
    *,
    power_window_s: float | None,
    iters: int | None,
    timed_s: float | None,
) -> Settings:
    """How runner.measure_repetition measures one configuration on `bench`, its collective
    repeated `count` times (run_configs' arguments)."""
    config_id, config, spec = point
    return Settings(
        config_id=config_id,
        config=config,
        step_of=lambda phase, bench=bench: functools.partial(
            bench.run_phase, BENCH_PHASE.get(phase, phase)
        ),
        units=UNITS,
        comm=comm_role,
        finish=lambda phase, m, spec=spec, count=count: _phase_metrics(
            m, phase, spec, count, ctx.world_size
        ),
        extra={"power": _power_info(ctx)},
        power_window_s=power_window_s,
        iters=iters or ctx.preset.microbench.profiled_iters or None,
        timed_iters=iters,
        timed_s=timed_s,
        meter=bench.compute_timer,
    )


def run_configs(
    ctx: RunContext,
    todo_configs: list[ConfigPoint],
    *,
    repeats: int | None = None,
    max_repeats: int = 4096,
    power_window_of: Callable[[dict[str, Any]], float] | None = None,
    iters: int | None = None,
    timed_s: float | None = None,
    numbered: tuple[int, int] | None = None,
    prepare: Callable[[ConfigPoint], ConfigPoint] | None = None,
) -> None:
    """Measure every phase of every configuration, skipping repetitions already on disk.

    `repeats` fixes the collective's count (default: calibrated to span the compute, at
    most `max_repeats`); `power_window_of(config)` gives a configuration's power window in
    seconds (default: the preset's); `iters` the measured iterations a pass (default: the
    preset's, for the timed pass too) and `timed_s` its least seconds (default: the
    preset's); `numbered` this list's place in the figure's configurations
    (runner.pending); `prepare(point)` settles a configuration's run-time settings before it
    is measured (contention's twins). The A/A repeat of the overlap phase runs where the
    figure derives the noise floor, or a figure that copies its records does
    (figures.runs_aa_repeat).
    A configuration already measured for the figure this one reuses (fig8: fig6's) is
    copied, not measured again (artifact.rank.reuse).
    """
    phases_of = functools.partial(_phases_of, ctx)
    for point, todo in pending(ctx, todo_configs, phases_of, numbered):
        phases = phases_of(point)
        if reuse(ctx, point, phases):
            continue
        point = prepare(point) if prepare else point
        config_id, config, spec = point
        bench = Microbench(spec, ctx.device, seed=ctx.rank)
        count = bench.calibrate(ctx.warmup, repeats=repeats, max_repeats=max_repeats)
        config = {**config, "comm_repeats": count}
        comm_role = ("memory",) if spec.comm == "copy" else ("communication",)
        log.info("%s: collective repeated %d times to span the compute", config_id, count)
        settings = _settings(
            ctx,
            ConfigPoint(config_id, config, spec),
            bench,
            count,
            comm_role,
            power_window_s=power_window_of(config) if power_window_of else None,
            iters=iters,
            timed_s=timed_s,
        )
        for rep in todo:
            stop_requested(ctx)
            results = measure_repetition(ctx, settings, rep, balanced_order(phases, rep))
            log_repetition(ctx, config_id, rep, results)
        bench.close()
        check_gpu_alone(ctx)
