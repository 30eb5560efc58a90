"""FSDP rows of Figs. 4, 5, 10 and 11: DeepSpeed ZeRO-3 (the paper's, the default),
torch's FSDP2 (`run --fsdp-impl fsdp2`) or both side by side (`--fsdp-impl
deepspeed,fsdp2`), over the same models, steps and modes."""

from __future__ import annotations

from artifact.experiments import training
from artifact.rank.runner import ConfigPoint, RunContext
from artifact.workloads.fsdp_deepspeed import FsdpSpec, FsdpTrainer

FRAMEWORK = {"deepspeed": "deepspeed-zero3", "fsdp2": "torch-fsdp2"}


def config_for(
    ctx: RunContext, model: str, micro_batch: int, precision: str, impl: str = "deepspeed"
) -> ConfigPoint:
    spec, recompute_why = training.recompute_as_asked(
        ctx, FsdpSpec(training.model_of(ctx, model), micro_batch, precision, impl=impl)
    )
    # DeepSpeed's ids are the output contract and stay as they were; FSDP2's name the
    # implementation, so records of both can share a folder (and configs.json) untouched
    tag = "fsdp" if impl == "deepspeed" else "fsdp2"
    config_id = training.config_id(ctx, model, tag, precision, micro_batch, spec.recompute)
    config = training.base_config(
        ctx,
        model,
        "fsdp",
        precision,
        micro_batch=micro_batch,
        framework=FRAMEWORK[impl],
        fsdp_impl=impl,
        attention="sdpa",  # artifact.workloads.models: torch's scaled_dot_product_attention
        recompute=spec.recompute,
        recompute_why=recompute_why,
    )
    return ConfigPoint(config_id, config, spec)


def make_trainer(spec: FsdpSpec, ctx: RunContext):
    if spec.impl == "fsdp2":
        from artifact.workloads.fsdp2 import Fsdp2Trainer

        return Fsdp2Trainer(spec, ctx.device, ctx.rank)
    return FsdpTrainer(spec, ctx.device, ctx.rank)


def run(
    ctx: RunContext, configs: list[ConfigPoint], numbered: tuple[int, int] | None = None
) -> None:
    training.run_configs(ctx, configs, lambda spec: make_trainer(spec, ctx), numbered)
