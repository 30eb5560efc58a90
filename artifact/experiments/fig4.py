"""Fig. 4: compute slowdown under overlap, FSDP (DeepSpeed ZeRO-3) and pipeline
(Megatron-core 1F1B) rows.

The sweep: the preset's models x micro batches in its main precision (FP16 on GPUs, as
the paper; FP32 on CPU), for both parallelisms. Fig. 5's end-to-end times come from the
same records.
"""

from __future__ import annotations

from artifact.experiments import configs_of, fsdp, pipeline
from artifact.rank.runner import RunContext


def run(ctx: RunContext) -> None:
    points = configs_of(ctx)  # artifact.figures.sweeps.fig4
    fsdp_points = [
        fsdp.config_for(ctx, p.model, p.micro_batch, p.precision, p.impl)
        for p in points
        if p.parallelism == "fsdp"
    ]
    pipeline_points = [
        pipeline.config_for(ctx, p.model, p.micro_batch, p.precision)
        for p in points
        if p.parallelism == "pipeline"
    ]
    # numbered across both lists, so progress and its ETA count the figure's configurations
    total = len(fsdp_points) + len(pipeline_points)
    if fsdp_points:
        fsdp.run(ctx, fsdp_points, numbered=(0, total))
    if pipeline_points:
        pipeline.run(ctx, pipeline_points, numbered=(len(fsdp_points), total))
