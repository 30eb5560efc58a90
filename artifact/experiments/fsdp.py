"""FSDP rows (DeepSpeed ZeRO-3) of Figs. 4, 5, 10 and 11."""

from __future__ import annotations

from typing import Any

from artifact.experiments import training
from artifact.runner import RunContext
from artifact.workloads.fsdp_deepspeed import FsdpSpec, FsdpTrainer


def config_for(
    ctx: RunContext, model: str, micro_batch: int, precision: str
) -> tuple[str, dict[str, Any], FsdpSpec]:
    spec, recompute_why = training.recompute_as_asked(
        ctx, FsdpSpec(training.model_of(ctx, model), micro_batch, precision)
    )
    config_id = f"{model}_fsdp_{precision}_mb{micro_batch}_w{ctx.world_size}"
    config_id += "_rc" if spec.recompute else ""
    config = training.base_config(
        ctx,
        model,
        "fsdp",
        precision,
        micro_batch=micro_batch,
        framework="deepspeed-zero3",
        attention="sdpa",  # artifact.workloads.models: torch's scaled_dot_product_attention
        recompute=spec.recompute,
        recompute_why=recompute_why,
    )
    return config_id, config, spec


def run(ctx: RunContext, configs: list[tuple[str, dict[str, Any], FsdpSpec]]) -> None:
    training.run_configs(ctx, configs, lambda spec: FsdpTrainer(spec, ctx.device, ctx.rank))
