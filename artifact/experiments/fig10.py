"""Fig. 10: FP32 vs FP16 (and BF16, an extra row) on slowdown and power, FSDP rows."""

from __future__ import annotations

from artifact.experiments import fsdp, training
from artifact.runner import RunContext

DERIVED = training.DERIVED
PRECISIONS = ("fp32", "fp16", "bf16")


def run(ctx: RunContext) -> None:
    mb = ctx.preset.micro_batches[0]
    fsdp.run(
        ctx, [fsdp.config_for(ctx, m, mb, p) for m in training.models_of(ctx) for p in PRECISIONS]
    )
