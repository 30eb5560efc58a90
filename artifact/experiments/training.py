"""The training-step measurement shared by the model figures (4, 5, 10, 11).

A configuration (model, parallelism, batch, precision) builds one trainer (a DeepSpeed
ZeRO-3 engine, or a Megatron-core pipeline); every repetition runs the three modes in a
rotating order on it, each timed, profiled and, with telemetry, held under the power
sampler. A trainer provides step(mode) -> loss, params and model_flops_per_step(world).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from artifact.aggregate import MODE_DERIVED, ratio
from artifact.config import get_model
from artifact.measure.peak import peak_matmul_tflops
from artifact.modes import Mode
from artifact.runner import (
    BASE_UNITS,
    POWER_UNITS,
    RunContext,
    measure_repetition,
    rep_done,
)

log = logging.getLogger(__name__)

MODES = (Mode.OVERLAP, Mode.SEQUENTIAL, Mode.NOCOMM)
CPU_NOTE = "CPU (gloo): a functional check, not a measurement of GPU contention"
UNITS = {**BASE_UNITS, **POWER_UNITS, "mfu": "ratio", "loss": "nats", "tflops_per_gpu": "TFLOP/s"}

DERIVED = [
    ratio("slowdown", ("overlap", "compute_ms"), ("sequential", "compute_ms")),
    *MODE_DERIVED,
]


def mode_order(rep: int) -> tuple[Mode, ...]:
    k = rep % len(MODES)
    return MODES[k:] + MODES[:k]


def base_config(
    ctx: RunContext, model: str, parallelism: str, precision: str, **extra: Any
) -> dict[str, Any]:
    return {
        "gpu": ctx.provenance.get("gpu_model") or "cpu",
        "model": model,
        "parallelism": parallelism,
        "precision": precision,
        "seq_len": get_model(model).seq_len,
        "world_size": ctx.world_size,
        **extra,
        "note": "; ".join(
            n for n in (extra.get("note", ""), "" if ctx.device.type == "cuda" else CPU_NOTE) if n
        ),
    }


def models_of(ctx: RunContext) -> list[str]:
    return ctx.options.get("models") or list(ctx.preset.models)


def run_configs(
    ctx: RunContext,
    configs: list[tuple[str, dict[str, Any], Any]],
    make_trainer: Callable[[Any], Any],
) -> None:
    """Measure every mode of every configuration, skipping repetitions already on disk."""
    peaks: dict[str, float] = {}
    names = [m.value for m in MODES]
    for config_id, config, spec in configs:
        todo = [r for r in range(ctx.reps) if not rep_done(ctx, config_id, tuple(names), r)]
        if not todo:
            log.info("%s: all %d repetitions on disk, skipped", config_id, ctx.reps)
            continue
        if spec.precision not in peaks:
            peaks[spec.precision] = peak_matmul_tflops(ctx.device, spec.precision)
        peak = peaks[spec.precision]
        trainer = make_trainer(spec)
        flops = trainer.model_flops_per_step(ctx.world_size)
        config = {**config, "params": trainer.params, "peak_tflops_per_gpu": peak}
        for mode in MODES:  # warm-up, discarded
            for _ in range(ctx.warmup):
                trainer.step(mode)
        losses: dict[str, list] = {m.value: [] for m in MODES}  # this repetition's, by mode

        def step_of(phase, trainer=trainer, losses=losses):
            return lambda: losses[phase].append(trainer.step(Mode(phase)))

        def loss_of(phase, losses=losses):
            # only ranks that compute the loss have one (a pipeline's last stage)
            return {"loss": [float(x) for x in losses[phase][: ctx.iters] if x is not None]}

        def with_mfu(phase, m, flops=flops, peak=peak):
            tflops = flops / (m["e2e_ms"] * 1e-3) / ctx.world_size / 1e12
            return m | {"tflops_per_gpu": tflops, "mfu": tflops / peak}

        for rep in todo:
            for kept in losses.values():
                kept.clear()
            results = measure_repetition(
                ctx,
                config_id=config_id,
                config=config,
                rep=rep,
                phases=tuple(m.value for m in mode_order(rep)),
                step_of=step_of,
                units=UNITS,
                per_rank_extra=loss_of,
                finish=with_mfu,
            )
            if not ctx.is_writer:
                continue
            log.info(
                "%s rep %d: overlap %.1f ms, sequential %.1f ms, MFU %.3f",
                config_id,
                rep,
                results["overlap"]["e2e_ms"],
                results["sequential"]["e2e_ms"],
                results["overlap"]["mfu"],
            )
        del trainer
