"""V2's checks on hand-made delay series: each prediction passes, fails or is inconclusive."""

import pandas as pd
import pytest

from artifact.analyze.aggregate import v2_delays
from artifact.judge.validation import v1_verdicts, v2_checks, v2_verdicts
from tests.factories import record


def _series(seq_slope: float, overlap_slope: float, noise: float = 0.0, reps: int = 5):
    """summary rows, configs and records of four delays with known slopes (ms)."""
    rows, configs, records = [], {}, []
    for k, (fraction, delay) in enumerate(((0, 0.0), (0.25, 3.0), (0.5, 6.0), (1, 12.0))):
        cid = f"m_delay{fraction}"
        configs[cid] = {"delay_fraction": fraction}
        means = {
            ("sequential", "e2e_ms"): 22 + seq_slope * delay,
            ("sequential", "delay_ms"): delay,
            ("overlap", "e2e_ms"): 18 + overlap_slope * delay,
            ("overlap", "compute_ms"): 14.0,
            ("nocomm", "e2e_ms"): 12.0,
            ("comm_alone", "e2e_ms"): 10.5 + delay,
            ("derived", "e2e_ideal_ms"): 16 + overlap_slope * delay,
            ("derived", "e2e_ideal_max_ms"): max(12.0, 10.5 + delay),
        }
        for (mode, metric), mean in means.items():
            rows.append(
                {"figure": "v2", "config_id": cid, "mode": mode, "metric": metric, "mean": mean}
            )
        for rep in range(reps):
            jitter = noise * (-1) ** (rep + k) * (rep + 1)
            for mode in ("sequential", "overlap"):
                e2e = means[(mode, "e2e_ms")] + jitter
                metrics = {"e2e_ms": e2e} | ({"delay_ms": delay} if delay else {})
                records.append(record("v2", cid, mode, rep, metrics=metrics))
    return pd.DataFrame(rows), configs, records


def _checks(*args, **kwargs):
    summary, configs, records = _series(*args, **kwargs)
    table = v2_delays(summary, configs, "v2")
    return table, {c.name: c for c in v2_checks(table, records)}


def test_table_orders_delays_and_reads_the_injected_delay():
    table, _ = _checks(1.0, 1.0)
    assert table["delay_fraction"].tolist() == [0, 0.25, 0.5, 1]
    assert table["injected_delay_ms"].tolist() == [0.0, 3.0, 6.0, 12.0]


def test_slopes_of_one_pass():
    _, checks = _checks(1.0, 1.0, noise=0.05)
    seq = checks["sequential E2E rises by the delay"]
    assert seq.passed is True and seq.value == pytest.approx(1.0, abs=0.02)
    assert seq.ci_low < 1 < seq.ci_high
    assert checks["overlapped E2E follows the communication chain"].passed is True


def test_a_delay_that_hides_fails_the_sequential_prediction():
    _, checks = _checks(0.5, 1.0, noise=0.05)
    seq = checks["sequential E2E rises by the delay"]
    assert seq.passed is False and seq.value == pytest.approx(0.5, abs=0.02)


def test_noise_makes_a_slope_inconclusive_not_a_pass():
    _, checks = _checks(1.0, 1.0, noise=3.0)
    assert checks["sequential E2E rises by the delay"].passed is None


def test_overlap_far_above_the_longer_chain_fails():
    # overlapped 18 + 12 = 30 ms against max(12, 22.5) = 22.5 ms: +33 %
    _, checks = _checks(1.0, 1.0)
    chain = checks["at the largest delay, overlap reaches the longer chain"]
    assert chain.passed is False and chain.value == pytest.approx(30 / 22.5 - 1)


def test_eq4_below_the_bound_is_reported():
    summary, configs, records = _series(1.0, 1.0)
    summary.loc[summary["metric"] == "e2e_ideal_ms", "mean"] = 5.0
    checks = {c.name: c for c in v2_checks(v2_delays(summary, configs, "v2"), records)}
    bound = checks["Eq. 4's ideal is not below the no-contention bound"]
    assert bound.passed is False and bound.value == 4
    assert "0, 0.25, 0.5, 1" in bound.reason


def test_no_v2_rows_no_checks():
    empty = pd.DataFrame(columns=["figure", "config_id", "mode", "metric", "mean"])
    assert v2_checks(v2_delays(empty, {}, "v2"), []) == []


def test_v2_checks_become_verdict_rows():
    for seq_slope, first in ((1.0, "holds"), (0.5, "fails")):
        summary, configs, records = _series(seq_slope, 1.0)
        for i, r in enumerate(records):
            r["rep"] = i % 5
        rows = v2_verdicts(summary, configs, records, "v2")
        checks = v2_checks(v2_delays(summary, configs, "v2"), records)
        assert [r["item"] for r in rows] == [c.name for c in checks]
        expected = [{True: "holds", False: "fails", None: "inconclusive"}[c.passed] for c in checks]
        assert [r["verdict"] for r in rows] == expected
        assert rows[0]["verdict"] == first  # sequential E2E vs delay: slope 1 or 0.5
        assert {r["item_type"] for r in rows} == {"check"} and rows[0]["n"] == 5


@pytest.mark.parametrize(
    ("mean", "low", "high", "verdict"),
    [
        (0.004, -0.002, 0.010, "holds"),  # within +-1 %
        (0.030, 0.020, 0.040, "fails"),  # 2-4 % slower back to back than between gaps
        (-0.030, -0.040, -0.015, "fails"),
        # fig8 on one H200 (session 6): a CI this wide is no evidence of a match
        (-0.0468, -0.1041, 0.0104, "inconclusive"),
        (0.006, -0.002, 0.014, "inconclusive"),  # crosses the margin's edge
    ],
)
def test_v1_is_a_check_row_a_configuration(mean, low, high, verdict):
    summary = pd.DataFrame(
        [
            {"figure": "fig4", "config_id": "a", "mode": "derived", "metric": "v1_baseline_gap"}
            | {"mean": mean, "ci_low": low, "ci_high": high, "n": 5, "ci_method": "t"},
            {"figure": "fig4", "config_id": "a", "mode": "derived", "metric": "slowdown"}
            | {"mean": 0.2, "ci_low": 0.1, "ci_high": 0.3, "n": 5, "ci_method": "t"},
        ]
    )
    (row,) = v1_verdicts(summary)
    assert (row["figure"], row["config_id"], row["verdict"]) == ("fig4", "a", verdict)
    assert f"{100 * mean:+.2f} %" in row["reason"]
    assert "[-1, +1] %" in row["reason"]  # the margin in the unit of the CI beside it


def test_v1_with_too_few_repetitions_is_inconclusive():
    """An interrupted fig8 on the H200 (session 7) left n = 2: CI [-73, +65] %."""
    summary = pd.DataFrame(
        [
            {"figure": "fig8", "config_id": "a", "mode": "derived", "metric": "v1_baseline_gap"}
            | {"mean": -0.0439, "ci_low": -0.7333, "ci_high": 0.6455, "n": 2, "ci_method": "t"}
        ]
    )
    (row,) = v1_verdicts(summary)
    assert row["verdict"] == "inconclusive"
    assert "too few repetitions" in row["reason"] and "n = 2" in row["reason"]
