"""Eq. 1-5 and the statistics, against hand-computed values."""

import math

import numpy as np
import pytest
from scipy import stats

from artifact.analyze import metrics as eq
from artifact.core import equations, traffic


def test_equations_by_hand():
    # compute 12 ms overlapped vs 10 ms sequential: 20 % slower, 2 ms lost
    assert equations.slowdown(12.0, 10.0) == pytest.approx(0.2)
    assert equations.slowdown_time(12.0, 10.0) == pytest.approx(2.0)
    # an overlapped iteration of 30 ms would have taken 28 ms without the 2 ms slowdown
    assert equations.e2e_ideal(30.0, 12.0, 10.0) == pytest.approx(28.0)
    # sequential 36 ms vs overlapped 30 ms: 20 % penalty
    assert equations.sequential_penalty(36.0, 30.0) == pytest.approx(0.2)
    assert equations.e2e_ideal_max(10.0, 14.0) == 14.0
    assert traffic.busbw_factor(4) == pytest.approx(1.5)
    assert traffic.busbw_factor(2) == pytest.approx(1.0)
    assert traffic.busbw_factor(1) == 0.0


def test_describe_by_hand():
    s = eq.describe([1.0, 2.0, 3.0, 4.0, 5.0])
    assert s.mean == 3.0 and s.n == 5
    assert s.std == pytest.approx(math.sqrt(2.5))
    assert s.cv == pytest.approx(math.sqrt(2.5) / 3)
    assert s.noisy  # CV 53 % > 5 %
    assert 1.0 <= s.ci_low < 3.0 < s.ci_high <= 5.0


def test_ci_narrows_with_more_repetitions():
    rng = np.random.default_rng(0)
    small = eq.describe(100 + rng.normal(0, 1, 5))
    large = eq.describe(100 + rng.normal(0, 1, 100))
    assert (large.ci_high - large.ci_low) < (small.ci_high - small.ci_low)
    assert not large.noisy and large.ci_low < 100.5 and large.ci_high > 99.5


def test_degenerate_and_tiny_samples():
    s = eq.describe([2.0, 2.0, 2.0])
    assert (s.mean, s.std, s.ci_low, s.ci_high, s.noisy) == (2.0, 0.0, 2.0, 2.0, False)
    one = eq.describe([7.0])
    assert one.mean == 7.0 and one.n == 1 and math.isnan(one.ci_low) and math.isnan(one.std)
    assert eq.describe([]).n == 0


def test_derived_ci_propagates_both_inputs():
    overlap = [12.0, 12.2, 11.8, 12.1, 11.9]
    sequential = [10.0, 10.1, 9.9, 10.05, 9.95]
    s = eq.describe_derived(equations.slowdown, overlap, sequential)
    assert s.mean == pytest.approx(equations.slowdown(np.mean(overlap), np.mean(sequential)))
    assert s.ci_low < s.mean < s.ci_high
    # a noisier input widens the derived CI
    noisy = eq.describe_derived(equations.slowdown, [11.0, 13.0, 12.0, 10.5, 13.5], sequential)
    assert (noisy.ci_high - noisy.ci_low) > (s.ci_high - s.ci_low)
    # a CI that excludes 0 means the slowdown is significant
    assert s.ci_low > 0.15


def test_derived_of_three_inputs_matches_eq4():
    s = eq.describe_derived(equations.e2e_ideal, [30.0, 31.0], [12.0, 12.0], [10.0, 10.0])
    assert s.mean == pytest.approx(28.5)
    # Eq. 4 is linear: the paired interval is the t interval of the per-repetition
    # values 28 and 29 (n = 2: t(0.975, 1) = 12.7, so it is wide, as it should be)
    lo, hi = stats.t.interval(0.95, 1, loc=28.5, scale=stats.sem([28.0, 29.0]))
    assert (s.ci_low, s.ci_high) == pytest.approx((lo, hi))
    assert s.n == 2 and s.ci_method == "paired student-t (delta method)"


def test_small_n_means_get_the_student_t_interval():
    x = [10.0, 10.4, 9.7, 10.1]
    s = eq.describe(x)
    lo, hi = stats.t.interval(0.95, 3, loc=np.mean(x), scale=stats.sem(x))
    assert (s.ci_low, s.ci_high) == pytest.approx((lo, hi))
    assert s.ci_method == "student-t"
    assert eq.describe([7.0]).ci_method == "none (n=1)"
    assert eq.describe([2.0, 2.0]).ci_method == "none (all values equal)"


def test_twenty_repetitions_or_more_bootstrap_but_never_narrower_than_t():
    x = 100 + np.random.default_rng(1).lognormal(0, 1, 25)
    s = eq.describe(x)
    lo, hi = stats.t.interval(0.95, 24, loc=np.mean(x), scale=stats.sem(x))
    assert s.ci_method == "bootstrap-bca (at least student-t)"
    assert s.ci_low <= lo and s.ci_high >= hi
    assert s.ci_high - s.mean > s.mean - s.ci_low  # BCa follows the right skew
    again = eq.describe(x)  # seeded: the same records give the same CI
    assert (again.ci_low, again.ci_high) == (s.ci_low, s.ci_high)


def test_paired_ratio_uses_the_delta_method_standard_error():
    a = np.array([12.0, 12.9, 11.5, 12.4, 11.8])
    b = np.array([10.0, 10.6, 9.7, 10.2, 9.9])
    s = eq.describe_derived(equations.slowdown, a, b)
    ratio = a.mean() / b.mean()
    assert s.mean == pytest.approx(ratio - 1)  # the equation on the means
    z = (a - ratio * b) / b.mean()  # the ratio estimator's linearised values, by hand
    lo, hi = stats.t.interval(0.95, 4, loc=ratio - 1, scale=stats.sem(z))
    assert (s.ci_low, s.ci_high) == pytest.approx((lo, hi), rel=1e-6)
    assert s.std == pytest.approx(np.std(z, ddof=1), rel=1e-6)


def test_pairing_removes_drift_shared_by_a_repetition():
    drift = np.array([1.0, 1.1, 0.9, 1.05, 0.95])  # each repetition's clock, both modes
    overlap = 12.0 * drift * np.array([1.0, 1.002, 0.999, 1.001, 0.998])
    sequential = 10.0 * drift
    s = eq.describe_derived(equations.slowdown, overlap, sequential)
    assert s.ci_low < 0.2 < s.ci_high and s.ci_high - s.ci_low < 0.005
    # each mode on its own varies by +-10 %: its mean's CI is far wider
    o = eq.describe(overlap)
    assert (o.ci_high - o.ci_low) / o.mean > 10 * (s.ci_high - s.ci_low)


def test_paired_samples_must_have_one_value_per_repetition():
    with pytest.raises(ValueError, match="one value per repetition"):
        eq.describe_derived(equations.slowdown, [1.0, 2.0, 3.0], [1.0, 2.0])
    one = eq.describe_derived(equations.slowdown, [12.0], [10.0])
    assert one.mean == pytest.approx(0.2) and one.ci_method == "none (n=1)"


def test_batch_and_single_calls_agree():
    rng = np.random.default_rng(2)
    a, b = rng.normal(12, 1, (4, 6)), rng.normal(10, 1, (4, 6))
    batch = eq.paired_interval(equations.slowdown, [a, b])
    for i in range(4):
        one = eq.describe_derived(equations.slowdown, a[i], b[i])
        assert (one.ci_low, one.ci_high) == pytest.approx((batch.low[i], batch.high[i]))


def test_a_max_uses_per_repetition_values_not_a_derivative():
    # compute alone and communication alone tie on average (fig8 calibrates them so):
    # max() has no derivative there; a linearisation would give a zero-width CI
    s = eq.describe_derived(equations.e2e_ideal_max, [1.0, 2.0, 3.0], [3.0, 2.0, 1.0])
    assert s.mean == 2.0 and s.ci_method == "paired student-t (per-repetition values)"
    per_rep = [3.0, 2.0, 3.0]
    lo, hi = stats.t.interval(0.95, 2, loc=2.0, scale=stats.sem(per_rep))
    assert (s.ci_low, s.ci_high) == pytest.approx((lo, hi))


def test_matmul_peak_is_the_fastest_windows_median(monkeypatch):
    """MFU's denominator: a slow start (clocks still ramping) does not lower the peak; the
    fastest window's median does not take one lucky product either."""
    import torch

    from artifact.measure import peak

    monkeypatch.setattr(peak, "WARMUP_S", 0.0)
    # 5 windows of 10 products: slow, slow, fast (one outlier faster still), slow, slow
    times = [2.0] * 20 + [1.0] * 9 + [0.1] + [2.0] * 20
    seq = iter(times)
    monkeypatch.setattr(peak, "timed", lambda fn, device: next(seq))
    n = 64
    got = peak.peak_matmul_tflops.__wrapped__(torch.device("cpu"), "fp32", n)
    assert got == pytest.approx(2 * n**3 / 1.0 / 1e12)
    assert next(seq, None) is None  # every window was timed
