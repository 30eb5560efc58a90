"""Experiments: the rank-level code that measures a figure and writes its records.

Each module provides `run(ctx, **params)`; which figure calls which module, with which
parameters, is declared in the figure registry (artifact/figures/, one file a figure).
Importing an experiment imports torch and the workloads; nothing else in the artifact
that only reads results (summarize, compare, report, plan) imports this package.
"""


def configs_of(ctx, **where):
    """The run's figure's configurations here: its spec's sweep (FigureSpec.configs,
    artifact/figures/sweeps.py), the list the plan prices too. `where`: more of
    sweeps.Where (fig9's cap levels)."""
    from artifact.figures import spec_of
    from artifact.figures.sweeps import Where

    return spec_of(ctx.figure).configs(Where.of(ctx, **where))
