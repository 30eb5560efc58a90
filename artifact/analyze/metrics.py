"""The statistics every number carries; the paper's equations they are applied to are
artifact.core.equations (the figures' derived quantities name them).

Statistics (docs/measurement.md, "Statistics"): the unit is the repetition. A measured
mean's 95 % CI is Student-t below MIN_BOOTSTRAP_N repetitions, else a seeded BCa
bootstrap over repetitions widened where needed to the t interval. A derived quantity
is the equation applied to the means; its CI pairs the modes of each repetition (they
share its drift): Student-t with the delta method's standard error below
MIN_BOOTSTRAP_N, else a paired BCa bootstrap (again at least the t interval).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass

import numpy as np
from scipy import differentiate, stats

from artifact.core.equations import e2e_ideal_max

NOISY_CV = 0.05  # docs/design.md section 3: flag coefficient of variation above 5 %
CONFIDENCE = 0.95
BOOTSTRAP_RESAMPLES = 2000
MIN_BOOTSTRAP_N = 20  # below this many repetitions a CI is Student-t, not bootstrap
_BOOTSTRAP_CELLS = 4_000_000  # resampled values held at once (memory bound for batches)
_SEED = 20250703  # fixed, so the same records always give the same CI


# Equations with a kink: no derivative where the inputs tie, so no delta method. Fig. 8
# calibrates communication alone to take about as long as compute alone, so
# e2e_ideal_max sits near its tie: its CI uses the per-repetition values instead.
NOT_DIFFERENTIABLE = frozenset({e2e_ideal_max, np.maximum, np.minimum})


@dataclass(frozen=True)
class Stats:
    mean: float
    std: float
    ci_low: float
    ci_high: float
    n: int
    cv: float
    noisy: bool
    ci_method: str = ""  # how ci_low/ci_high were computed (summary.csv column)

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Interval:
    """A batch of estimates with their 95 % CIs; arrays share the batch shape (() for one).

    std is the spread of one repetition's value (ddof=1): for a derived quantity, that of
    its linearised per-repetition value (delta method) or of fn(x_i), so a t row satisfies
    ci = estimate +- t(0.975, n-1) * std / sqrt(n).
    """

    estimate: np.ndarray
    std: np.ndarray
    low: np.ndarray
    high: np.ndarray
    n: int
    method: str


def _cv(mean: float, std: float) -> float:
    return abs(std / mean) if mean and not math.isnan(std) else math.nan


def mean_interval(values, axis: int = -1) -> Interval:
    """Mean of repetitions along `axis` with its 95 % CI, for a whole batch at once.

    Below MIN_BOOTSTRAP_N repetitions: Student-t (scipy.stats.t.interval with
    scipy.stats.sem), exact for normal data and close for mildly skewed data; the
    bootstrap under-covers there (at n = 2 its interval is about [min, max]). From
    MIN_BOOTSTRAP_N on: BCa bootstrap over repetitions, seeded, widened on either side
    to the t interval where that reaches further (_at_least).
    """
    with _quiet():
        return _mean_interval(values, axis)


def _mean_interval(values, axis: int) -> Interval:
    x = np.moveaxis(np.asarray(values, dtype=float), axis, -1)
    n = x.shape[-1]
    if n < 2:
        return _no_interval(x.mean(axis=-1) if n else np.full(x.shape[:-1], math.nan), n)
    mean = x.mean(axis=-1)
    std = x.std(axis=-1, ddof=1)
    low, high = _t_interval(mean, stats.sem(x, axis=-1), n)
    if n < MIN_BOOTSTRAP_N:
        return Interval(mean, std, low, high, n, "student-t")
    low, high, method = _at_least(low, high, *_bootstrap_interval((x,), _mean_statistic, False))
    return Interval(mean, std, low, high, n, method)


def paired_interval(
    fn: Callable[..., float], samples: Sequence, axis: int = -1, delta: bool | None = None
) -> Interval:
    """fn(mean of samples[0], mean of samples[1], ...) with its 95 % CI, pairing repetitions.

    samples[j][..., i] is input j of repetition i: every repetition measures all inputs
    (modes), so they share that repetition's drift, and the CI keeps them together.
    The estimate is the equation applied to the means. Below MIN_BOOTSTRAP_N
    repetitions the CI is Student-t around that estimate, with the standard error of the
    delta method: each repetition's value linearised about the means,
    z_i = sum_j dfn/dx_j * (x_ji - mean_j), the gradient by scipy.differentiate.jacobian
    (for a ratio a/b this is the classical ratio estimator's (a_i - R b_i) / mean(b)).
    Where the gradient is not finite, or delta is False (default: False for the
    functions in NOT_DIFFERENTIABLE, else True), the spread of the per-repetition values
    fn(x_i) is used instead. From MIN_BOOTSTRAP_N on: paired BCa bootstrap of fn(means)
    over repetitions, at least as wide as that t interval.
    """
    if delta is None:
        delta = fn not in NOT_DIFFERENTIABLE
    with _quiet():
        return _paired_interval(fn, samples, axis, delta)


def _paired_interval(fn: Callable[..., float], samples: Sequence, axis: int, delta: bool):
    x = np.stack([np.moveaxis(np.asarray(s, dtype=float), axis, -1) for s in samples])
    n = x.shape[-1]
    means = x.mean(axis=-1)  # (inputs, *batch)
    estimate = np.asarray(fn(*means), dtype=float) if n else np.full(x.shape[1:-1], np.nan)
    if n < 2:
        return _no_interval(estimate, n)
    grad = _gradient(fn, means) if delta else np.full(means.shape, np.nan)
    z = np.sum(grad[..., None] * (x - means[..., None]), axis=0)
    per_rep = np.asarray(fn(*x), dtype=float)
    smooth = np.all(np.isfinite(grad), axis=0)
    z = np.where(smooth[..., None], z, per_rep - per_rep.mean(axis=-1, keepdims=True))
    std = z.std(axis=-1, ddof=1)
    low, high = _t_interval(estimate, stats.sem(z, axis=-1), n)
    if n < MIN_BOOTSTRAP_N:
        how = "delta method" if np.all(smooth) else "per-repetition values"
        return Interval(estimate, std, low, high, n, f"paired student-t ({how})")

    def statistic(*resampled, axis=-1):
        return fn(*(r.mean(axis=axis) for r in resampled))

    low, high, method = _at_least(low, high, *_bootstrap_interval(tuple(x), statistic, True))
    return Interval(estimate, std, low, high, n, f"paired {method}")


def describe(values: Sequence[float]) -> Stats:
    """Mean, sample std, 95 % CI of the mean (mean_interval), CV and the noisy flag."""
    x = np.asarray(values, dtype=float)
    if x.size < 2:
        return _too_few(x.mean() if x.size else math.nan, int(x.size))
    iv = mean_interval(x)
    return _stats(iv, zero_spread=bool(np.ptp(x) == 0))


def describe_derived(
    fn: Callable[..., float], *samples: Sequence[float], delta: bool | None = None
) -> Stats:
    """Statistics of fn(mean(a), mean(b), ...) over paired repetitions (paired_interval).

    Every sample holds one value per repetition, in the same repetition order: sample
    j's i-th value is input j measured in repetition i. n is the number of repetitions;
    std is the spread of one repetition's (linearised) derived value.
    """
    arrays = [np.asarray(s, dtype=float) for s in samples]
    sizes = {a.size for a in arrays}
    if len(sizes) > 1:
        raise ValueError(
            f"paired samples need one value per repetition each; got sizes {sorted(sizes)}"
        )
    n = sizes.pop() if sizes else 0
    if n < 2:
        with _quiet():
            mean = float(fn(*(a.mean() for a in arrays))) if n else math.nan
        return _too_few(mean, n)
    iv = paired_interval(fn, arrays, delta=delta)
    return _stats(iv, zero_spread=all(np.ptp(a) == 0 for a in arrays))


def _stats(iv: Interval, zero_spread: bool) -> Stats:
    mean, std = float(iv.estimate), float(iv.std)
    low, high, method = float(iv.low), float(iv.high), iv.method
    if zero_spread:  # every repetition gave the same values: nothing to resample
        low, high, std, method = mean, mean, 0.0, "none (all values equal)"
    cv = _cv(mean, std)
    return Stats(mean, std, low, high, iv.n, cv, bool(cv > NOISY_CV), method)


def _too_few(mean: float, n: int) -> Stats:
    nan = math.nan
    return Stats(float(mean), nan, nan, nan, n, nan, False, f"none (n={n})")


def _no_interval(estimate: np.ndarray, n: int) -> Interval:
    nan = np.full(np.shape(estimate), np.nan)
    return Interval(np.asarray(estimate, dtype=float), nan, nan, nan, n, f"none (n={n})")


@contextmanager
def _quiet():
    """No numpy/scipy warnings: n/a, zero denominators and tiny samples are expected here
    and end as NaN in the table."""
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        yield


def _mean_statistic(a, axis=-1):
    return a.mean(axis=axis)


def _t_interval(center: np.ndarray, sem: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """scipy.stats.t.interval around `center`; a zero standard error gives [center, center]."""
    center, sem = np.broadcast_arrays(np.asarray(center, float), np.asarray(sem, float))
    zero = sem == 0
    low, high = stats.t.interval(CONFIDENCE, n - 1, loc=center, scale=np.where(zero, 1.0, sem))
    return np.where(zero, center, low), np.where(zero, center, high)


def _at_least(t_low, t_high, low, high, method: str):
    """The bootstrap interval, widened on either side to the Student-t interval: at n = 25
    the BCa interval of a mean alone covers about 92-93 %, as its quantiles come from
    the plug-in (divide-by-n) variance; the t interval restores 95 %, and the bootstrap
    still extends the interval on a skewed side."""
    low, high = np.fmin(low, t_low), np.fmax(high, t_high)
    return low, high, f"{method} (at least student-t)"


def _gradient(fn: Callable[..., float], means: np.ndarray) -> np.ndarray:
    """d fn / d input at the means, shape (inputs, *batch); NaN where it cannot be had."""
    step = np.where(means != 0, 1e-3 * np.abs(means), 1e-3)
    try:
        res = differentiate.jacobian(lambda xi: fn(*xi), means, initial_step=step)
    except (ValueError, TypeError, FloatingPointError):
        return np.full(means.shape, np.nan)
    # res.success is not required: a partial derivative of 0 never meets the default
    # relative tolerance, yet its estimate (~1e-10) is right
    return np.asarray(res.df, dtype=float).reshape(means.shape)


def _bootstrap_interval(samples: tuple[np.ndarray, ...], statistic, paired: bool):
    """Seeded BCa bootstrap over the last axis; percentile where BCa is undefined."""
    low, high = _bootstrap(samples, statistic, "BCa", paired).confidence_interval
    low, high = np.asarray(low, dtype=float), np.asarray(high, dtype=float)
    bad = np.isnan(low) | np.isnan(high)
    if not np.any(bad):
        return low, high, "bootstrap-bca"
    p_low, p_high = _bootstrap(samples, statistic, "percentile", paired).confidence_interval
    low, high = np.where(bad, p_low, low), np.where(bad, p_high, high)
    return low, high, "bootstrap-bca" if not np.all(bad) else "bootstrap-percentile"


def _bootstrap(samples: tuple[np.ndarray, ...], statistic, method: str, paired: bool):
    size = sum(s.size for s in samples)
    with _quiet():  # scipy warns on tiny or near-degenerate samples
        return stats.bootstrap(
            samples,
            statistic,
            vectorized=True,
            paired=paired,
            axis=-1,
            confidence_level=CONFIDENCE,
            n_resamples=BOOTSTRAP_RESAMPLES,
            batch=max(1, _BOOTSTRAP_CELLS // size),  # bounds memory for a batch of samples
            method=method,
            rng=np.random.default_rng(_SEED),
        )


def ratio_interval(
    a: tuple[float, float, int], b: tuple[float, float, int]
) -> tuple[float, float, float]:
    """mean(a) / mean(b) with its 95 % CI, the two samples independent (Fig. 9's caps run
    one after another, not within one repetition): (mean, std, n) of each. Delta method:
    the ratio's relative variance is the sum of the two means' relative variances,
    Student-t with Welch-Satterthwaite degrees of freedom. Paired samples (one value of
    each per repetition) go to paired_interval instead, which keeps their covariance.
    NaN interval where either side has fewer than 2 repetitions or a zero mean."""
    (ma, sa, na), (mb, sb, nb) = a, b
    ratio = ma / mb if mb else math.nan
    if na < 2 or nb < 2 or not ma or not mb or math.isnan(sa) or math.isnan(sb):
        return ratio, math.nan, math.nan
    va, vb = (sa / ma) ** 2 / na, (sb / mb) ** 2 / nb  # each mean's relative variance
    if va + vb == 0:
        return ratio, ratio, ratio
    df = (va + vb) ** 2 / (va**2 / (na - 1) + vb**2 / (nb - 1))
    half = stats.t.ppf(0.5 + CONFIDENCE / 2, df) * abs(ratio) * math.sqrt(va + vb)
    return ratio, ratio - half, ratio + half
