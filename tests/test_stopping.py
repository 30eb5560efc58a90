"""Adaptive repetitions (artifact.analyze.stopping): a configuration whose pilot CI is
already narrow stops at 5 repetitions; a noisy one goes on. Coverage is
tests/test_coverage.py's."""

import math

import pytest
from scipy import stats

from artifact.analyze import stopping


def test_a_narrow_pilot_stops_at_five_a_noisy_one_goes_on():
    # Eq. 1 on one H200 (results/h200x1/session10/quick): fig8's all-reduce row had a
    # half-width of 0.0036 at n = 5; compute_slowdown_mean's tolerance is 0.05
    n, why = stopping.decide({"slowdown": (0.0036, 0.05)}, max_reps=25)
    assert n == 5 and "slowdown sets it" in why
    # fig4's FSDP peak-power increase: 0.087 at n = 5 against 0.10: 25 is not enough
    n, why = stopping.decide(
        {"slowdown": (0.0086, 0.05), "peak_power_increase": (0.087, 0.10)}, max_reps=25
    )
    assert n == 25 and why.startswith("peak_power_increase sets it")
    assert "25 (the run's maximum) do not bring its 95 % CI to a quarter" in why


def test_steins_n_brings_the_half_width_to_a_quarter_of_the_tolerance():
    s, tol = 0.02, 0.05  # half-width 0.0248 at n = 5
    n = stopping.needed(s, tol, max_reps=100)
    t4 = stats.t.ppf(0.975, 4)
    assert t4 * s / math.sqrt(n) <= tol / 4 < t4 * s / math.sqrt(n - 1)
    assert n == math.ceil((t4 * s / (tol / 4)) ** 2) == 20


def test_the_preset_bounds_the_repetitions():
    assert stopping.needed(1e-9, 0.05, max_reps=25) == 5
    assert stopping.needed(1.0, 0.05, max_reps=25) == 25
    assert stopping.decide({}, max_reps=25)[0] == 25
    n, why = stopping.decide({"slowdown": (0.001, 0.05)}, max_reps=5)
    assert n == 5 and "no room to adapt" in why


def test_steins_interval_is_never_narrower_than_the_usual_one():
    low, high = stopping.stein_interval(0.2, 0.19, 0.21, pilot_spread=0.02, n=16)
    half = stats.t.ppf(0.975, 4) * 0.02 / 4
    assert (low, high) == pytest.approx((0.2 - half, 0.2 + half))
    assert stopping.stein_interval(0.2, 0.1, 0.3, 0.02, 16) == (0.1, 0.3)
