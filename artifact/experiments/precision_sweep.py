"""Fig. 10 and Fig. 11: one FSDP configuration in several precisions.

The preset's models (its precision_models where it names them) at its first micro-batch, each in every precision the figure asks
for (artifact/figures/fig10.py: FP32, FP16 and BF16; fig11.py: FP32 and TF32). On CPUs
TF32 does not exist: its rows run FP32 arithmetic, and the CPU note says so.
"""

from __future__ import annotations

from artifact.experiments import fsdp, training
from artifact.run.runner import RunContext


def run(ctx: RunContext, precisions: tuple[str, ...]) -> None:
    mb = ctx.preset.micro_batches[0]
    models = ctx.options.models or ctx.preset.precision_models or training.models_of(ctx)
    points = [(m, mb, p) for m in models for p in precisions]
    fsdp.run(ctx, fsdp.configs_for(ctx, points))
