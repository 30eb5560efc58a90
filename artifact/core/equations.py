"""The paper's equations (Section IV-D), on numbers or numpy arrays (a derived quantity's CI
evaluates them on batches and per repetition: artifact.analyze.metrics).

Measured quantities come from traces and timers; everything here is *derived* from them
and is labelled so in summary.csv (docs/design.md section 3):
    Eq. 1  slowdown          = (ComputeOverlap - ComputeSequential) / ComputeSequential
    Eq. 3  slowdown_time     =  ComputeOverlap - ComputeSequential
    Eq. 4  e2e_ideal         =  E2E_overlap - slowdown_time
           sequential_penalty = (E2E_sequential - E2E_overlap) / E2E_overlap
           e2e_ideal_max     =  max(isolated compute, isolated communication)   (ConCCL's ideal)

Here, below the figures that name them in their derived quantities and the analysis that
computes them (docs/design.md section 2, "Layers").
"""

from __future__ import annotations

import numpy as np


def slowdown(compute_overlap, compute_sequential):
    """Eq. 1, as a ratio (0.189 means 18.9 % slower)."""
    return (compute_overlap - compute_sequential) / compute_sequential


def slowdown_time(compute_overlap, compute_sequential):
    """Eq. 3, as a time."""
    return compute_overlap - compute_sequential


def e2e_ideal(e2e_overlap, compute_overlap, compute_sequential):
    """Eq. 4: the overlapped iteration had compute not slowed down."""
    return e2e_overlap - slowdown_time(compute_overlap, compute_sequential)


def sequential_penalty(e2e_sequential, e2e_overlap):
    """How much longer the sequential iteration is than the overlapped one, as a ratio."""
    return (e2e_sequential - e2e_overlap) / e2e_overlap


def e2e_ideal_max(compute_alone, comm_alone):
    """Perfect overlap with no contention: the longer of the two alone."""
    return np.maximum(compute_alone, comm_alone)
