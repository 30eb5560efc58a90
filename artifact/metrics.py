"""The paper's equations (Section IV-D) and the statistics every number carries.

Measured quantities come from traces and timers; everything here is *derived* from them
and is labelled so in summary.csv (DESIGN.md section 3):
    Eq. 1  slowdown          = (ComputeOverlap - ComputeSequential) / ComputeSequential
    Eq. 3  slowdown_time     =  ComputeOverlap - ComputeSequential
    Eq. 4  e2e_ideal         =  E2E_overlap - slowdown_time
           sequential_penalty = (E2E_sequential - E2E_overlap) / E2E_overlap
           e2e_ideal_max     =  max(isolated compute, isolated communication)   (ConCCL's ideal)
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

import numpy as np
from scipy import stats

NOISY_CV = 0.05  # DESIGN.md: flag coefficient of variation above 5 %
CONFIDENCE = 0.95
BOOTSTRAP_RESAMPLES = 2000
_SEED = 20250703  # fixed, so the same records always give the same CI


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


@dataclass(frozen=True)
class Stats:
    mean: float
    std: float
    ci_low: float
    ci_high: float
    n: int
    cv: float
    noisy: bool

    def as_dict(self) -> dict:
        return asdict(self)


def _cv(mean: float, std: float) -> float:
    return abs(std / mean) if mean and not math.isnan(std) else math.nan


def describe(values: Sequence[float]) -> Stats:
    """Mean, sample std, 95 % bootstrap CI of the mean (BCa), CV and the noisy flag."""
    x = np.asarray(values, dtype=float)
    if x.size < 2:
        return _too_few(x.mean() if x.size else math.nan, int(x.size))
    mean, std = float(x.mean()), float(x.std(ddof=1))
    if np.ptp(x) == 0:  # degenerate: every resample is the same
        return Stats(mean, std, mean, mean, int(x.size), _cv(mean, std), False)
    res = _bootstrap((x,), lambda a, axis=-1: a.mean(axis=axis), "BCa")
    lo, hi = res.confidence_interval
    if math.isnan(lo) or math.isnan(hi):  # BCa is undefined on some tiny samples
        lo, hi = _bootstrap(
            (x,), lambda a, axis=-1: a.mean(axis=axis), "percentile"
        ).confidence_interval
    cv = _cv(mean, std)
    return Stats(mean, std, float(lo), float(hi), int(x.size), cv, bool(cv > NOISY_CV))


def describe_derived(fn: Callable[..., float], *samples: Sequence[float]) -> Stats:
    """Statistics of fn(mean(a), mean(b), ...) over independent samples, one per input.

    The point estimate is fn of the means; the CI resamples every input independently
    (scipy's multi-sample bootstrap, percentile method), so each measured input's
    uncertainty propagates into the derived number. std is the bootstrap distribution's;
    n is the smallest sample size.
    """
    arrays = tuple(np.asarray(s, dtype=float) for s in samples)
    n = min(a.size for a in arrays)
    mean = float(fn(*(a.mean() for a in arrays))) if n else math.nan
    if n < 2:
        return _too_few(mean, n)
    if all(np.ptp(a) == 0 for a in arrays):
        return Stats(mean, 0.0, mean, mean, n, _cv(mean, 0.0), False)

    def statistic(*resampled, axis=-1):
        return fn(*(r.mean(axis=axis) for r in resampled))

    res = _bootstrap(arrays, statistic, "percentile")
    lo, hi = res.confidence_interval
    std = float(np.std(res.bootstrap_distribution, ddof=1))
    cv = _cv(mean, std)
    return Stats(mean, std, float(lo), float(hi), n, cv, bool(cv > NOISY_CV))


def _too_few(mean: float, n: int) -> Stats:
    nan = math.nan
    return Stats(float(mean), nan, nan, nan, n, nan, False)


def _bootstrap(samples: tuple[np.ndarray, ...], statistic, method: str):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # scipy warns on tiny or near-degenerate samples
        return stats.bootstrap(
            samples,
            statistic,
            vectorized=True,
            paired=False,
            confidence_level=CONFIDENCE,
            n_resamples=BOOTSTRAP_RESAMPLES,
            method=method,
            rng=np.random.default_rng(_SEED),
        )


def busbw_factor(world_size: int) -> float:
    """nccl-tests' all-reduce bus-bandwidth factor 2(n-1)/n."""
    return 2 * (world_size - 1) / world_size if world_size > 1 else 0.0
