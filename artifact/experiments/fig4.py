"""Fig. 4: compute slowdown under overlap, FSDP (DeepSpeed ZeRO-3) and pipeline
(Megatron-core 1F1B) rows.

The sweep: the preset's models x micro batches in its main precision (FP16 on GPUs, as
the paper; FP32 on CPU), for both parallelisms. Fig. 5's end-to-end times come from the
same records.
"""

from __future__ import annotations

from artifact.experiments import fsdp, pipeline, training
from artifact.run.runner import RunContext


def run(ctx: RunContext) -> None:
    grid = [(m, mb) for m in training.models_of(ctx) for mb in ctx.preset.micro_batches]
    precision = ctx.preset.precision
    chosen = ctx.options.parallelisms or ("fsdp", "pipeline")
    fsdp_points, pipeline_points = [], []
    if "fsdp" in chosen:
        fsdp_points = fsdp.configs_for(ctx, [(m, mb, precision) for m, mb in grid])
    if "pipeline" in chosen:
        pipeline_points = [pipeline.config_for(ctx, m, mb, precision) for m, mb in grid]
    # numbered across both lists, so progress and its ETA count the figure's configurations
    total = len(fsdp_points) + len(pipeline_points)
    if fsdp_points:
        fsdp.run(ctx, fsdp_points, numbered=(0, total))
    if pipeline_points:
        pipeline.run(ctx, pipeline_points, numbered=(len(fsdp_points), total))
