"""Coverage of the 95 % CIs in summary.csv, by simulation with a known truth.

What is simulated: repetition i of a configuration measures every mode in turn, so its
modes share that repetition's drift (clock, temperature, neighbours). We draw

    drift_i ~ D                  one multiplicative factor per repetition, E[D] = 1
    a_i = drift_i * A_i          e.g. ComputeOverlap of repetition i
    b_i = drift_i * B_i          e.g. ComputeSequential of repetition i

with drift, A and B independent and the repetitions independent and identically
distributed, so every estimand is well defined: E[a] = E[A], E[b] = E[B] (E[D] = 1).
A measured mean estimates E[a]; Eq. 1 applied to the means, (mean a - mean b) / mean b,
estimates the ratio of the true means, E[A] / E[B] - 1, the number the paper reports
(not E[(a_i - b_i) / b_i], which differs by a Jensen term). Two noise models:

    normal:     A ~ N(12, 0.6), B ~ N(10, 0.5), D ~ N(1, 0.05)
    log-normal: A = 12 LN(0, 0.25), B = 10 LN(0, 0.15), D = LN(0, 0.05) / E[LN(0, 0.05)]
                (right-skewed, like timings with occasional slow repetitions;
                E[c LN(0, s)] = c exp(s^2 / 2))

For n = 3, 5, 10 and 25 repetitions, 2,000 seeded trials each, the intervals of the
package (metrics.mean_interval and metrics.paired_interval, the functions behind
describe and describe_derived, called on the whole batch of trials at once) must cover
the truth in 93-97 % of trials. The binomial standard error of a coverage from 2,000
trials is 0.49 points, so a method whose true coverage is 95 % passes with margin,
and one at 91 % or below fails. The same harness measures the method this replaced
(BCa bootstrap of the mean at n = 3): it must under-cover, which is why it went.
"""

from __future__ import annotations

import functools
import warnings

import numpy as np
import pytest
from scipy import stats

from artifact.analyze import metrics as eq
from artifact.analyze import stopping
from artifact.core import equations
from artifact.judge.verdicts import MIN_REPETITIONS

TRIALS = 2000
NS = (3, 5, 10, 25)


def _lognormal_mean(scale: float, s: float) -> float:
    return scale * float(np.exp(s**2 / 2))


MODELS = {
    # name: (draw(rng, size) -> (a, b), truth of E[a], truth of Eq. 1 on the true means)
    "normal": (
        lambda rng, size: _draw(
            rng,
            size,
            lambda r, k: r.normal(12, 0.6, k),
            lambda r, k: r.normal(10, 0.5, k),
            lambda r, k: r.normal(1, 0.05, k),
        ),
        12.0,
        equations.slowdown(12.0, 10.0),
    ),
    "lognormal": (
        lambda rng, size: _draw(
            rng,
            size,
            lambda r, k: 12 * r.lognormal(0, 0.25, k),
            lambda r, k: 10 * r.lognormal(0, 0.15, k),
            lambda r, k: r.lognormal(0, 0.05, k) / _lognormal_mean(1, 0.05),
        ),
        _lognormal_mean(12, 0.25),
        equations.slowdown(_lognormal_mean(12, 0.25), _lognormal_mean(10, 0.15)),
    ),
}


def _draw(rng, size, draw_a, draw_b, draw_drift):
    trials, n = size
    drift = draw_drift(rng, (trials, n))
    return drift * draw_a(rng, (trials, n)), drift * draw_b(rng, (trials, n))


def _seed(model: str, n: int) -> int:
    return 1000 * n + sorted(MODELS).index(model)


def _covers(low, high, truth) -> float:
    return float(np.mean((low <= truth) & (truth <= high)))


def coverage(model: str, n: int) -> dict[str, float]:
    """Coverage of the package's mean and paired-ratio intervals in one harness."""
    draw, mean_truth, ratio_truth = MODELS[model]
    a, b = draw(np.random.default_rng(_seed(model, n)), (TRIALS, n))
    m = eq.mean_interval(a)
    r = eq.paired_interval(equations.slowdown, [a, b])
    assert m.estimate.shape == r.estimate.shape == (TRIALS,)
    return {
        "mean": _covers(m.low, m.high, mean_truth),
        "ratio": _covers(r.low, r.high, ratio_truth),
        "mean_method": m.method,
        "ratio_method": r.method,
    }


def old_bootstrap_mean_coverage(model: str, n: int) -> float:
    """The replaced rule for a measured mean: BCa bootstrap at any n (percentile where
    BCa is undefined), as metrics.describe computed it before."""
    draw, mean_truth, _ = MODELS[model]
    a, _ = draw(np.random.default_rng(_seed(model, n)), (TRIALS, n))
    kw = dict(axis=-1, vectorized=True, n_resamples=2000, batch=100)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = stats.bootstrap((a,), np.mean, method="BCa", rng=np.random.default_rng(1), **kw)
        low, high = res.confidence_interval
        pct = stats.bootstrap(
            (a,), np.mean, method="percentile", rng=np.random.default_rng(1), **kw
        ).confidence_interval
    bad = np.isnan(low) | np.isnan(high)
    low, high = np.where(bad, pct.low, low), np.where(bad, pct.high, high)
    return _covers(low, high, mean_truth)


@pytest.mark.parametrize("n", NS)
@pytest.mark.parametrize("model", sorted(MODELS))
def test_intervals_cover_the_truth_95_percent(model, n):
    c = coverage(model, n)
    expected = "student-t" if n < eq.MIN_BOOTSTRAP_N else "bootstrap-bca (at least student-t)"
    assert c["mean_method"] == expected
    assert c["ratio_method"].startswith("paired ")
    assert 0.93 <= c["mean"] <= 0.97, c
    assert 0.93 <= c["ratio"] <= 0.97, c


@pytest.mark.parametrize("model", sorted(MODELS))
def test_the_replaced_bootstrap_under_covers_at_three_repetitions(model):
    assert old_bootstrap_mean_coverage(model, 3) < 0.93


# --- adaptive repetitions (artifact.analyze.stopping) -----------------------------------
#
# Each trial measures up to MAX_REPS repetitions; the rule sees the first 5 (the pilot)
# and picks N; the trial reports the package's paired Eq. 1 interval on its first N
# repetitions, widened to Stein's (stopping.stein_interval). Coverage must stay at least
# 94 % at every tolerance of expected/'s ratio items (those below 1: slowdowns,
# penalties, power increases, overlap fractions) and at those tolerances as the H200
# sees them: the simulated spread of Eq. 1 (about 0.085 a repetition) is 1.2-12 times
# the spreads one H200 measured (0.007-0.07, results/h200x1/session10/quick), so
# tolerances up to 12 x 0.1 = 1.2 here stand for the same ratio of tolerance to noise.
# The rule does not look at the band, so where the paper's value lies does not enter;
# the rule that did (stop once the verdict is settled) is measured too and must
# under-cover, which is why it is not the rule. 4,000 trials: a binomial standard
# error of 0.34 points, so a rule that truly covers 95 % passes with 3 of them to spare.

MAX_REPS = 25  # the paper preset's repetitions
ADAPTIVE_TRIALS = 4000
H200_EQUIVALENT = (0.3, 0.6, 1.2)


def _ratio_tolerances() -> list[float]:
    from artifact.judge.expected import load_expected

    tols = {float(i.tolerance) for i in load_expected() if i.is_number}
    return sorted(t for t in tols if t < 1)


@functools.cache
def _prefix_intervals(model: str) -> tuple[np.ndarray, ...]:
    """(estimates, lows, highs) [n - 5, trial] of the paired Eq. 1 CI on each trial's
    first n repetitions, n = 5 .. MAX_REPS, and the truth."""
    draw, _, truth = MODELS[model]
    rng = np.random.default_rng(_seed(model, MAX_REPS + 1))
    a, b = draw(rng, (ADAPTIVE_TRIALS, MAX_REPS))
    ivs = [
        eq.paired_interval(equations.slowdown, [a[:, :n], b[:, :n]])
        for n in range(stopping.MIN_REPETITIONS, MAX_REPS + 1)
    ]
    est, lows, highs = (
        np.array([getattr(iv, k) for iv in ivs]) for k in ("estimate", "low", "high")
    )
    return est, lows, highs, truth


def adaptive_coverage(model: str, tolerance: float) -> tuple[float, float, float]:
    """(coverage with Stein's floor, coverage of the usual CI alone, mean repetitions)."""
    est, lows, highs, truth = _prefix_intervals(model)
    pilot = stopping.spread_of((highs[0] - lows[0]) / 2)
    n = stopping.needed(pilot, tolerance, MAX_REPS)
    k, trial = n - stopping.MIN_REPETITIONS, np.arange(ADAPTIVE_TRIALS)
    low, high = stopping.stein_interval(est[k, trial], lows[k, trial], highs[k, trial], pilot, n)
    plain = _covers(lows[k, trial], highs[k, trial], truth)
    return _covers(low, high, truth), plain, float(n.mean())


def test_the_stopping_rule_is_tested_at_expected_s_tolerances():
    assert _ratio_tolerances() == [0.05, 0.1, 0.15, 0.25]
    assert stopping.MIN_REPETITIONS == MIN_REPETITIONS


@pytest.mark.parametrize("tolerance", [0.05, 0.1, 0.15, 0.25, *H200_EQUIVALENT])
@pytest.mark.parametrize("model", sorted(MODELS))
@pytest.mark.slow  # over 1.5 s on 2 cores (a CLI process, or a long simulation)
def test_adaptive_repetitions_keep_95_percent_coverage(model, tolerance):
    cov, _, mean_n = adaptive_coverage(model, tolerance)
    assert cov >= 0.94, (cov, mean_n)
    assert stopping.MIN_REPETITIONS <= mean_n <= MAX_REPS


@pytest.mark.slow  # over 1.5 s on 2 cores (a CLI process, or a long simulation)
def test_adaptive_repetitions_adapt_and_need_steins_floor():
    """Where the tolerance is wide against the noise the trials stop early (normal, 0.25:
    about 14 repetitions of 25 on average); there the usual CI alone under-covers (93.4 %),
    and Stein's floor restores it (96.0 %)."""
    cov, plain, mean_n = adaptive_coverage("normal", 0.25)
    assert mean_n < 15
    assert plain < 0.94 <= cov and cov > plain + 0.02


@pytest.mark.slow  # over 1.5 s on 2 cores (a CLI process, or a long simulation)
@pytest.mark.parametrize("model", sorted(MODELS))
def test_stopping_once_the_verdict_is_settled_under_covers(model):
    """The rule the issue first proposed, looked at after every repetition: stop once
    the CI is narrow (half-width <= tolerance / 4) or settled (wholly inside or outside
    [value - tol, value + tol]). With the paper's value at a band edge it stops where the
    CI happens to clear the edge, and covers the truth in well under 93 % of trials."""
    _, lows, highs, truth = _prefix_intervals(model)
    tol = 0.1
    value = truth + tol  # the truth on the band's lower edge
    half = (highs - lows) / 2
    inside = (lows >= value - tol) & (highs <= value + tol)
    outside = (highs < value - tol) | (lows > value + tol)
    stop = (half <= tol / 4) | inside | outside
    stop[-1] = True
    k = np.argmax(stop, axis=0)
    trial = np.arange(ADAPTIVE_TRIALS)
    assert _covers(lows[k, trial], highs[k, trial], truth) < 0.90
