"""The training-step measurement shared by the model figures (4, 5, 10, 11).

A configuration (model, parallelism, batch, precision) builds one trainer (a DeepSpeed
ZeRO-3 engine, or a Megatron-core pipeline); every repetition runs the three modes, the
A/A repeat of `overlap` (the noise floor) and, where collectives move data (world size
above 1), the two zero-byte controls: timed together in interleaved rounds under the
power sampler (runner.interleaved_timed_pass), then each profiled, in the order of a
balanced (Williams) design. A trainer provides
step(phase) -> loss, params, model_flops_per_step(world) and close() (frees its memory
before the next configuration is built).

Before a configuration is built, the device is asked whether it can run it
(artifact.rank.capability: the precision, and the estimated memory against the free
memory). One it cannot run, or one that runs out of memory, is recorded "not run" with
the reason in status/<figure>.json, and the figure goes on with the rest.
"""

from __future__ import annotations

import gc
import logging
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

import torch

from artifact.core import emulated
from artifact.core.config import ModelConfig
from artifact.core.phases import TRAINING_MODES, balanced_order, training_phases
from artifact.estimate import memory
from artifact.figures import sweeps
from artifact.measure.peak import peak_matmul_tflops
from artifact.rank import capability, emulation, modes
from artifact.rank.reuse import reuse
from artifact.rank.runner import (
    BASE_UNITS,
    POWER_UNITS,
    ConfigPoint,
    RunContext,
    Settings,
    check_gpu_alone,
    gather,
    log_repetition,
    measure_repetition,
    pending,
    record_not_run,
    stop_requested,
)
from artifact.workloads.trainer import Trainer

log = logging.getLogger(__name__)

CPU_NOTE = "CPU (gloo): a functional check, not a measurement of GPU contention"
UNITS = {
    **BASE_UNITS,
    **POWER_UNITS,
    "mfu": "ratio",
    "loss": "nats",
    "tflops_per_gpu": "TFLOP/s",
    "emulated_mib_per_step": "MiB",
    "comm_calls_per_step": "count",
    "comm_mib_per_step": "MiB",
    "p2p_sent_mib_per_step": "MiB",
    "p2p_recv_mib_per_step": "MiB",
}


def phase_order(rep: int, world_size: int = 1) -> tuple[str, ...]:
    return balanced_order(training_phases(world_size), rep)


def recompute_as_asked(ctx: RunContext, spec):
    """The spec with recomputation as `--recompute` asks (auto: the preset's memory rule,
    artifact.estimate.memory.with_recompute), and why it is on ("" when off)."""
    choice = ctx.options.recompute or "auto"
    return memory.with_recompute(spec, ctx.world_size, choice, ctx.preset.recompute_above_gib)


def model_of(ctx: RunContext, name: str) -> ModelConfig:
    """The named model at the preset's sequence length (sweeps.model_at)."""
    return sweeps.model_at(ctx.preset, name)


def config_id(
    ctx: RunContext, model: str, tag: str, precision: str, micro_batch: int, recompute: bool
) -> str:
    """The output contract's id (sweeps.training_id: the one the plan lists)."""
    where = sweeps.Where.of(ctx)
    return sweeps.training_id(where, model, tag, precision, micro_batch, recompute)


def base_config(
    ctx: RunContext, model: str, parallelism: str, precision: str, **extra: Any
) -> dict[str, Any]:
    """The settings every record of a configuration carries. Emulated ones (rank 0 of W
    alone) say so: `emulated_world`, and a note that starts with "emulated:"."""
    world = ctx.options.emulate_world
    stand_in, ctas = emulation.stand_in() if world else (None, None)
    notes = (
        emulated.note(world, stand_in, ctas, ctx.provenance.get("gpu_model")) if world else "",
        extra.pop("note", ""),
        "" if ctx.device.type == "cuda" else CPU_NOTE,
    )
    return {
        "gpu": ctx.provenance.get("gpu_model") or "cpu",
        "model": model,
        "parallelism": parallelism,
        "precision": precision,
        "seq_len": model_of(ctx, model).seq_len,
        "world_size": ctx.world_size,
        **extra,
        **({"emulated_world": world, "stand_in": stand_in, "comm_ctas": ctas} if world else {}),
        "note": "; ".join(n for n in notes if n),
    }


def cannot_run(ctx: RunContext, spec: Any) -> tuple[str | None, float]:
    """(why no rank can run `spec` here, or None; its estimated peak bytes a rank).

    Every rank asks its own device; one rank's no is everyone's, so no rank is left
    waiting in a collective for a rank that skipped."""
    needed = memory.estimate(spec, ctx.world_size)
    reason = capability.precision_unsupported(ctx.device, spec.precision) or (
        capability.memory_unfit(needed, ctx.device, spec.micro_batch)
    )
    reasons = [r for r in gather(reason) if r]
    return (reasons[0] if reasons else None), needed


def release_memory(device: torch.device) -> None:
    """Return what a torn-down trainer held, so the next configuration starts clean."""
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


def run_configs(
    ctx: RunContext,
    configs: list[ConfigPoint],
    make_trainer: Callable[[Any], Trainer],
    numbered: tuple[int, int] | None = None,
) -> None:
    """Measure every mode of every configuration, skipping repetitions already on disk
    and configurations the device cannot run (recorded with their reason). `numbered`:
    this list's place in the figure's configurations (runner.pending)."""
    phases = training_phases(ctx.world_size)
    for point, todo in pending(ctx, configs, phases, numbered):
        if reuse(ctx, point, phases):
            continue
        config_id, config, spec = point
        reason, needed = cannot_run(ctx, spec)
        reason = config.get("emulation_refused") or reason
        if reason:
            record_not_run(ctx, config_id, reason)
            continue
        free = capability.free_memory_bytes(ctx.device)
        try:
            ctx.progress(f"{config_id}: calibrating the matmul peak ({spec.precision})")
            peak = peak_matmul_tflops(ctx.device, spec.precision)  # once a process
            config = {**config, "memory_estimate_gib": needed / memory.GIB}
            _measure(ctx, config_id, config, spec, todo, make_trainer, peak)
        except torch.OutOfMemoryError:
            reason = (
                f"out of memory at micro-batch {spec.micro_batch}: about "
                f"{needed / memory.GIB:.1f} GiB needed (estimate), {free / memory.GIB:.1f} GiB free"
            )
            record_not_run(ctx, config_id, reason)
            if ctx.world_size > 1:
                # the other ranks may be waiting in a collective this rank never joins:
                # the figure fails (its status says why) rather than hanging
                raise
        finally:
            release_memory(ctx.device)
        check_gpu_alone(ctx)


def _measure(
    ctx: RunContext,
    config_id: str,
    config: dict[str, Any],
    spec: Any,
    todo: Iterable[int],  # runner.pending's: lazy under --adaptive
    make_trainer: Callable[[Any], Trainer],
    peak: float,
) -> None:
    """Build one configuration's trainer, run its repetitions, and tear it down."""
    ctx.progress(f"{config_id}: setting up {config.get('framework', 'the trainer')}")
    trainer: Trainer = make_trainer(spec)
    try:
        flops = trainer.model_flops_per_step(ctx.world_size)
        config = {**config, "params": trainer.params, "peak_tflops_per_gpu": peak}
        # FP32 steps are several times slower than half-precision ones; the preset may
        # measure fewer of them (the record says how many)
        slow = spec.precision in ("fp32", "tf32")
        iters = ctx.preset.fp32_iters if slow else None
        timed_iters = ctx.preset.fp32_timed_iters if slow else ctx.preset.timed_rounds or None
        config["iters_per_rep"] = iters or ctx.iters
        for mode in TRAINING_MODES:  # the framework's first steps (allocations), discarded
            ctx.progress(f"{config_id}: warm-up ({mode})")
            trainer.step(mode)
        step_of, loss_of, kept_lists = _step_recorders(ctx, config, trainer)

        def with_mfu(phase, m):
            tflops = flops / (m["e2e_ms"] * 1e-3) / ctx.world_size / 1e12
            return m | {"tflops_per_gpu": tflops, "mfu": tflops / peak}

        settings = Settings(
            config_id=config_id,
            config=config,
            step_of=step_of,
            units=UNITS,
            per_rank_extra=loss_of,
            finish=with_mfu,
            iters=iters,
            timed_iters=timed_iters,
            interleave=True,  # host slow spells last seconds: compare within rounds
            timed_rounds_max=0 if slow else ctx.preset.timed_rounds_max,
        )
        for rep in todo:
            stop_requested(ctx)
            for kept in kept_lists:
                kept.clear()
            results = measure_repetition(ctx, settings, rep, phase_order(rep, ctx.world_size))
            log_repetition(ctx, config_id, rep, results)
    finally:
        trainer.close()


def _step_recorders(
    ctx: RunContext, config: dict[str, Any], trainer: Trainer
) -> tuple[Callable, Callable, tuple[list, ...]]:
    """(step_of, loss_of, the lists they fill) for one configuration: step_of(phase) runs
    a step and keeps its loss and traffic, loss_of(phase) gives the repetition's for its
    record; the lists are cleared before each repetition."""
    phases = training_phases(ctx.world_size)
    losses: dict[str, list] = {p: [] for p in phases}  # this repetition's, by phase

    moved: dict[str, list] = {p: [] for p in phases}  # emulated MiB per step, by phase
    # the rehearsal's: what this rank's collectives moved a step (modes.COUNTS), by phase
    counted: dict[str, list] = {p: [] for p in phases}
    modes.count_traffic(ctx.preset.rehearsal)

    def step_of(phase):
        def step():
            before, counts = emulation.moved_bytes(), Counter(modes.COUNTS)
            losses[phase].append(trainer.step(phase))
            moved[phase].append((emulation.moved_bytes() - before) / 2**20)
            counted[phase].append(modes.COUNTS - counts)

        return step

    def loss_of(phase):
        # only ranks that compute the loss have one (a pipeline's last stage); the
        # phase's last losses (its profiled steps come last)
        n = config["iters_per_rep"]
        out = {"loss": [float(x) for x in losses[phase][-n:] if x is not None]}
        if ctx.options.emulate_world:  # what rank 0's emulated traffic moved a step
            out["emulated_mib_per_step"] = moved[phase][-n:]
        if ctx.preset.rehearsal:
            out |= traffic_per_step(counted[phase][-n:])
        return out

    return step_of, loss_of, (*losses.values(), *moved.values(), *counted.values())


def traffic_per_step(steps: list[Counter]) -> dict[str, list[float]]:
    """A rank's counted collectives a step (modes.COUNTS' differences): the calls, the ring
    bytes and a pipeline's point-to-point bytes, in MiB (the rehearsal's records)."""
    mib = 2**20
    return {
        "comm_calls_per_step": [float(c["calls"]) for c in steps],
        "comm_mib_per_step": [c["ring_bytes"] / mib for c in steps],
        "p2p_sent_mib_per_step": [c["p2p_sent"] / mib for c in steps],
        "p2p_recv_mib_per_step": [c["p2p_recv"] / mib for c in steps],
    }
