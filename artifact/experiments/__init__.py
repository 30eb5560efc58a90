"""Experiments: the rank-level code that measures a figure and writes its records.

Each module provides `run(ctx, **params)`; which figure calls which module, with which
parameters, is declared in the figure registry (artifact/figures/, one file a figure).
Importing an experiment imports torch and the workloads; nothing else in the artifact
that only reads results (summarize, compare, report, plan) imports this package.
"""
