"""Fig. 4: compute slowdown under overlap, FSDP rows (DeepSpeed ZeRO-3).

The sweep: the preset's models x micro batches in its main precision (FP16 on GPUs, as
the paper; FP32 on CPU). Fig. 5's end-to-end times come from the same records.
"""

from __future__ import annotations

from artifact.experiments import fsdp
from artifact.runner import RunContext

DERIVED = fsdp.DERIVED


def run(ctx: RunContext) -> None:
    configs = [
        fsdp.config_for(ctx, model, mb, ctx.preset.precision)
        for model in fsdp.models_of(ctx)
        for mb in ctx.preset.micro_batches
    ]
    fsdp.run_configs(ctx, configs)
