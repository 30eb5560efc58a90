"""Fig. 6: power under overlap vs sequential execution (microbenchmark rows).

The paper's Fig. 6 shows power across GPUs and models; the model rows come with the
FSDP and pipeline workloads. Here: Fig. 8's microbenchmark, each phase held for the
preset's power window, with mean power from the energy counter, peak power from the
instant field, both also as % of the enforced limit (TDP), and the derived increases
under overlap. Machines without telemetry record the figure as not run, saying why.
Its repetitions run the A/A repeat as well, which fig6 does not use: fig8 then copies
these records instead of measuring the same configurations again (artifact.rank.reuse).
"""

from __future__ import annotations

from artifact.experiments import fig8
from artifact.rank.runner import RunContext

NO_TELEMETRY = "no GPU power telemetry on this machine (NVML and AMD-SMI unavailable)"


def run(ctx: RunContext) -> None:
    if ctx.power_backend.name == "none":
        if ctx.is_writer:
            ctx.store.write_status(ctx.figure, "not run", NO_TELEMETRY)
        return
    fig8.run_configs(ctx, fig8.configs_here(ctx))
    if ctx.is_writer:
        ctx.store.write_status(ctx.figure, "ran", f"power from {ctx.power_backend.name}")
