"""Pipeline-parallel rows (Megatron-core, 1F1B) of Figs. 4 and 5."""

from __future__ import annotations

from artifact.experiments import training
from artifact.rank.runner import ConfigPoint, RunContext
from artifact.workloads import megatron_cpu_shim
from artifact.workloads.pipeline_megatron import ONE_STAGE_NOTE, PipelineSpec, PipelineTrainer

# Recorded "not run" for every pipeline configuration under --emulate-world (status/).
EMULATION_REFUSED = (
    "under --emulate-world, stage 0 of W alone is not built for Megatron-core yet "
    "(its parallel state under the fake group is unvalidated and send/recv traffic is not "
    "emulated), and alone it would show no pipeline bubble; run the pipeline on real ranks"
)


def config_for(ctx: RunContext, model: str, micro_batch: int, precision: str) -> ConfigPoint:
    microbatches = max(1, ctx.preset.global_batch // micro_batch)  # data-parallel size 1
    spec, recompute_why = training.recompute_as_asked(
        ctx, PipelineSpec(training.model_of(ctx, model), micro_batch, microbatches, precision)
    )
    notes = [
        ONE_STAGE_NOTE if ctx.world_size == 1 else "",
        megatron_cpu_shim.NOTE if ctx.device.type == "cpu" else "",
    ]
    config_id = training.config_id(ctx, model, "pipeline", precision, micro_batch, spec.recompute)
    config = training.base_config(
        ctx,
        model,
        "pipeline",
        precision,
        micro_batch=micro_batch,
        num_microbatches=microbatches,
        stages=ctx.world_size,
        framework="megatron-core-1f1b",
        attention=spec.attention,
        recompute=spec.recompute,
        recompute_why=recompute_why,
        note="; ".join(n for n in notes if n),
        **({"emulation_refused": EMULATION_REFUSED} if ctx.options.emulate_world else {}),
    )
    return ConfigPoint(config_id, config, spec)


def run(
    ctx: RunContext, configs: list[ConfigPoint], numbered: tuple[int, int] | None = None
) -> None:
    training.run_configs(ctx, configs, lambda spec: PipelineTrainer(spec, ctx.device), numbered)
