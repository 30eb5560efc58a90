"""The instrument's controls and its verdict intervals (issue 28): negative controls gate
the claims that rest on them, proxies never enter the paper's tally, every interval
shown beside a mean is a CI of that mean, and the timed pass's median shrugs off a stall."""

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from artifact.judge import controls
from artifact.judge.compare import compare
from artifact.judge.numbers import mean_of_means
from artifact.judge.verdicts import paper_items, tally
from artifact.rank import runner
from artifact.report.instrument import CONTROLS_TEXT
from tests.test_compare import _folder, _row


def _fsdp_rows(control, penalty_control=(0.0, -0.004, 0.004)):
    """A 4-GPU FSDP configuration with its Eq. 1, penalty and their zero-byte controls,
    as summary.csv holds them (derived rows)."""
    rows = [
        _row("c4", "fsdp", 0.21, 0.19, 0.23),
        _row("c4", "fsdp", 0.21 - control[0], 0.19 - control[0], 0.23 - control[0],
             metric="slowdown_beyond_control"),
        _row("c4", "fsdp", *control, metric="control_slowdown"),
        _row("c4", "fsdp", 0.10, 0.08, 0.12, metric="sequential_penalty"),
        _row("c4", "fsdp", 0.10, 0.08, 0.12, metric="penalty_beyond_control"),
        _row("c4", "fsdp", *penalty_control, metric="control_penalty"),
    ]  # fmt: skip
    return rows


def without_grids(tmp_path):
    """expected/ with no item's `grid` (artifact/judge/coverage.py): a test of another
    gate on one configuration, which the grid's coverage would make inconclusive first."""
    from artifact.judge.expected import EXPECTED_DIR

    d = tmp_path / "expected-no-grid"
    d.mkdir(exist_ok=True)
    for f in EXPECTED_DIR.glob("*.yaml"):
        lines = f.read_text().splitlines(keepends=True)
        (d / f.name).write_text("".join(x for x in lines if not x.strip().startswith("grid:")))
    return d


def _slowdown_mean(out):
    v = compare(out, without_grids(out.parent))
    return v[(v["item"] == "compute_slowdown_mean") & (v["item_type"] == "number")].iloc[0], v


def test_a_control_that_reads_5_percent_makes_its_claim_inconclusive(tmp_path):
    out = _folder(tmp_path, _fsdp_rows((0.05, 0.04, 0.06)), {"c4": {"world_size": 4}})
    row, v = _slowdown_mean(out)
    assert row["verdict"] == "inconclusive"
    assert row["reason"].startswith(
        "The negative control does not read 0 in 1 of 1 configuration, so the effect "
        "cannot be told from the bias: c4: Eq. 1 slowdown with no data moved +5.00 % "
        "[+4.00, +6.00] % (fails)."
    )
    control = v[(v["item_type"] == "control") & (v["item"] == "control_slowdown")].iloc[0]
    assert control["verdict"] == "fails" and control["config_id"] == "c4"
    # the penalty's own control reads 0: its claim stays judged
    penalty = v[(v["item"] == "sequential_penalty_mean") & (v["item_type"] == "number")].iloc[0]
    assert penalty["verdict"] == "reproduced"
    assert "Every negative control (sequential penalty) reads 0." in penalty["reason"]


def test_a_control_that_reads_0_leaves_it_judged_beyond_the_control(tmp_path):
    out = _folder(tmp_path, _fsdp_rows((0.002, -0.003, 0.007)), {"c4": {"world_size": 4}})
    row, _ = _slowdown_mean(out)
    assert row["verdict"] == "reproduced"
    # judged as the effect beyond the control (0.208), not the raw 0.21
    assert row["mean"] == pytest.approx(0.208)
    assert "Every negative control (Eq. 1 slowdown) reads 0." in row["reason"]


def test_world_size_1_rows_are_their_own_controls(tmp_path):
    """With one GPU nothing moves: the configuration's own Eq. 1 and penalty are its
    control readings, shown first, and judged by the equivalence rule (+-1 point)."""
    rows = [
        _row("w1", "fsdp", 0.003, -0.002, 0.008),
        _row("w1", "fsdp", 0.02, 0.012, 0.028, metric="sequential_penalty"),
    ]
    v = compare(_folder(tmp_path, rows, {"w1": {"world_size": 1}}, comm_ms=0.0))
    first = v.iloc[:2].set_index("item")
    assert list(first["item_type"]) == ["control", "control"]
    assert first.loc["control_slowdown", "verdict"] == "holds"
    assert first.loc["control_penalty", "verdict"] == "fails"  # +2 % [1.2, 2.8]: a bias
    assert "world size 1: the collectives move no data" in first.loc["control_penalty", "reason"]


def test_a_control_inside_the_band_with_3_repetitions_gets_no_verdict(tmp_path):
    """-0.4 % [-0.75, -0.10] lies within +-1 point, but 3 repetitions bear no verdict."""
    rows = [_row("w1", "fsdp", -0.0043, -0.0075, -0.0010) | {"n": 3}]
    v = compare(_folder(tmp_path, rows, {"w1": {"world_size": 1}}, comm_ms=0.0))
    control = v[v["item"] == "control_slowdown"].iloc[0]
    assert control["verdict"] == "inconclusive"
    assert "too few repetitions to check (n = 3; a check needs 5)" in control["reason"]
    # the report's controls section says so beside the band rule
    assert (
        "inconclusive otherwise, or with fewer than 5 repetitions (the n column)" in CONTROLS_TEXT
    )


def test_fig8_on_one_gpu_is_not_counted_and_its_proxies_are_evidence_apart(
    tmp_path, v1_gap=(0.001, -0.003, 0.005)
):
    """The all-reduce moves nothing (its Eq. 1 is the microbenchmark's control and reads
    0); the two proxies slow the matmul down, each judged on its own rows."""
    rows = []
    for cid, par in (("ar", "allreduce"), ("copy", "proxy-copy"), ("one", "proxy-nccl-onerank")):
        slow = (0.001, -0.004, 0.006) if par == "allreduce" else (0.05, 0.03, 0.07)
        rows += [
            _row(cid, par, *slow, figure="fig8"),
            _row(cid, par, 0.0, -0.005, 0.005, metric="noise_floor", figure="fig8"),
            _row(cid, par, 3.0 if par != "allreduce" else math.nan, 2.9, 3.1,
                 metric="comm_role_ms", mode="overlap", figure="fig8"),
            _row(cid, par, *v1_gap, metric="v1_baseline_gap", figure="fig8"),
        ]  # fmt: skip
    configs = {c: {"world_size": 1, "note": f"proxy {c}"} for c in ("ar", "copy", "one")}
    v = compare(_folder(tmp_path, rows, configs, comm_ms=0.0))
    claim = v[v["item"] == "matmul_slower_beside_allreduce"].set_index("item_type", append=True)
    paper = v[(v["item"] == "matmul_slower_beside_allreduce") & (v["item_type"] == "claim")]
    assert paper["verdict"].tolist() == ["not applicable"]
    assert "Needs 2 or more ranks exchanging data" in paper["reason"].iloc[0]
    proxies = v[(v["item"] == "matmul_slower_beside_allreduce") & (v["item_type"] == "proxy")]
    assert sorted(proxies["config_id"]) == ["copy", "one"]  # one row per mechanism
    assert set(proxies["verdict"]) == {"reproduced"}
    assert len(claim) == 3
    # the tally counts the paper's items only; proxy rows have their own count
    assert (paper_items(v)["item_type"].isin(["number", "claim"])).all()
    assert "proxy evidence (not counted; " in tally(v)
    assert paper_items(v)["verdict"].eq("reproduced").sum() == 0
    # a script counting verdicts.csv needs no filter knowledge: counted_in says the tally
    assert v[v["counted_in"] == "paper"]["verdict"].eq("reproduced").sum() == 0
    assert set(proxies["counted_in"]) == {"proxy"}


def test_a_proxy_whose_v1_fails_is_inconclusive_with_the_v1_numbers(tmp_path):
    """The same proxies with V1 failing by 8 % (session 11's copy proxy: -7.88 %
    [-8.07, -7.70]): their slowdown cannot be read on that baseline."""
    rows = []
    for cid, par in (("ar", "allreduce"), ("copy", "proxy-copy")):
        slow = (0.001, -0.004, 0.006) if par == "allreduce" else (0.27, 0.265, 0.277)
        rows += [
            _row(cid, par, *slow, figure="fig8"),
            _row(cid, par, 0.0, -0.005, 0.005, metric="noise_floor", figure="fig8"),
            _row(cid, par, 3.0, 2.9, 3.1, metric="comm_role_ms", mode="overlap", figure="fig8"),
            _row(cid, par, -0.0788, -0.0807, -0.0770, metric="v1_baseline_gap", figure="fig8"),
        ]  # fmt: skip
    configs = {c: {"world_size": 1} for c in ("ar", "copy")}
    v = compare(_folder(tmp_path, rows, configs, comm_ms=0.0))
    proxy = v[(v["item"] == "matmul_slower_beside_allreduce") & (v["item_type"] == "proxy")]
    assert proxy["verdict"].tolist() == ["inconclusive"]
    reason = proxy["reason"].iloc[0]
    assert reason.startswith("V1 fails by 7.9 % for copy (")
    assert "-7.88 %, 95% CI [-8.07, -7.70] %" in reason
    assert "(it would read reproduced)" in reason


def test_the_interval_shown_is_a_ci_of_the_mean_shown():
    """Three configurations' means and t intervals (n = 5): the mean of the means, with
    the CI of that mean from their standard errors (not the mean of the bounds)."""
    se = np.array([0.01, 0.02, 0.015])
    means = np.array([0.18, 0.30, 0.05])
    t4 = stats.t.ppf(0.975, 4)
    rows = pd.DataFrame(
        {"mean": means, "ci_low": means - t4 * se, "ci_high": means + t4 * se, "n": [5, 5, 5]}
    )
    mean, lo, hi = mean_of_means(rows)
    half = t4 * math.sqrt((se**2).sum()) / 3
    assert mean == pytest.approx(means.mean())
    assert (lo, hi) == pytest.approx((means.mean() - half, means.mean() + half))
    # narrower than the mean of the bounds, which is no CI of anything
    assert hi - lo < rows["ci_high"].mean() - rows["ci_low"].mean()
    # one configuration: its own interval
    assert mean_of_means(rows.iloc[:1]) == pytest.approx((0.18, 0.18 - t4 * 0.01, 0.18 + t4 * 0.01))


def test_a_planted_stall_moves_the_median_e2e_by_under_1_percent():
    """Ten timed iterations of about 260 ms and one stall of 609 ms: the median moves
    under 1 %, the mean by over 10 %, and the stall is counted as an outlier."""
    rng = np.random.default_rng(0)
    clean = list(260 + rng.normal(0, 3, 10))
    stalled = clean[:5] + [609.0] + clean[5:]
    m_clean, _, _ = runner.reduce_ranks({"e2e_ms": clean})
    m_stall, _, e2e = runner.reduce_ranks({"e2e_ms": stalled})
    assert abs(m_stall["e2e_ms"] / m_clean["e2e_ms"] - 1) < 0.01
    assert np.mean(stalled) / np.mean(clean) - 1 > 0.1
    assert (m_clean["e2e_outliers"], m_stall["e2e_outliers"]) == (0, 1)
    assert m_stall["timed_iters"] == 11 and len(e2e) == 11


def test_the_control_margin_is_the_checks_margin():
    from artifact.judge.validation import V1_MARGIN

    assert controls.CONTROL_MARGIN == V1_MARGIN
