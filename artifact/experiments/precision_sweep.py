"""Fig. 10 and Fig. 11: one FSDP configuration in several precisions.

The preset's models (its precision_models where it names them) at its first micro-batch, each in every precision the figure asks
for (artifact/figures/fig10.py: FP32, FP16 and BF16; fig11.py: FP32 and TF32). On CPUs
TF32 does not exist: its rows run FP32 arithmetic, and the CPU note says so. Quick on
one GPU records them "not run" (sweeps.precision_sweep_refused says why).
"""

from __future__ import annotations

from artifact.experiments import fsdp
from artifact.figures import sweeps
from artifact.rank.runner import RunContext


def run(ctx: RunContext, precisions: tuple[str, ...]) -> None:
    where = sweeps.Where.of(ctx)
    if why := sweeps.precision_sweep_refused(where):
        if ctx.is_writer:
            ctx.store.write_status(ctx.figure, "not run", why)
        return
    points = sweeps.precision_sweep(where, precisions)  # the spec's sweep
    fsdp.run(
        ctx, [fsdp.config_for(ctx, p.model, p.micro_batch, p.precision, p.impl) for p in points]
    )
