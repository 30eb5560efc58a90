"""Fig. 11: FP32 with and without TF32 tensor cores, FSDP rows.

On CPUs TF32 does not exist: both rows run the same FP32 arithmetic, and the CPU note
on every row says the result is a functional check.
"""

from __future__ import annotations

from artifact.experiments import fsdp, training
from artifact.runner import RunContext

DERIVED = training.DERIVED
PRECISIONS = ("fp32", "tf32")


def run(ctx: RunContext) -> None:
    mb = ctx.preset.micro_batches[0]
    fsdp.run(
        ctx, [fsdp.config_for(ctx, m, mb, p) for m in training.models_of(ctx) for p in PRECISIONS]
    )
