"""Eq. 1-5 and the statistics, against hand-computed values."""

import math

import numpy as np
import pytest

from artifact import metrics as eq


def test_equations_by_hand():
    # compute 12 ms overlapped vs 10 ms sequential: 20 % slower, 2 ms lost
    assert eq.slowdown(12.0, 10.0) == pytest.approx(0.2)
    assert eq.slowdown_time(12.0, 10.0) == pytest.approx(2.0)
    # an overlapped iteration of 30 ms would have taken 28 ms without the 2 ms slowdown
    assert eq.e2e_ideal(30.0, 12.0, 10.0) == pytest.approx(28.0)
    # sequential 36 ms vs overlapped 30 ms: 20 % penalty
    assert eq.sequential_penalty(36.0, 30.0) == pytest.approx(0.2)
    assert eq.e2e_ideal_max(10.0, 14.0) == 14.0
    assert eq.busbw_factor(4) == pytest.approx(1.5)
    assert eq.busbw_factor(2) == pytest.approx(1.0)
    assert eq.busbw_factor(1) == 0.0


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
    s = eq.describe_derived(eq.slowdown, overlap, sequential)
    assert s.mean == pytest.approx(eq.slowdown(np.mean(overlap), np.mean(sequential)))
    assert s.ci_low < s.mean < s.ci_high
    # a noisier input widens the derived CI
    noisy = eq.describe_derived(eq.slowdown, [11.0, 13.0, 12.0, 10.5, 13.5], sequential)
    assert (noisy.ci_high - noisy.ci_low) > (s.ci_high - s.ci_low)
    # a CI that excludes 0 means the slowdown is significant
    assert s.ci_low > 0.15


def test_derived_of_three_inputs_matches_eq4():
    s = eq.describe_derived(eq.e2e_ideal, [30.0, 31.0], [12.0, 12.0], [10.0, 10.0])
    assert s.mean == pytest.approx(28.5)
    assert 28.0 <= s.ci_low <= s.ci_high <= 29.0
