"""The noise floor: the A/A repeat in the records, its paired row in summary.csv, and the
judgement that a slowdown claim holds only where each slowdown clears its floor."""

import json
import math
from dataclasses import replace

import pandas as pd
import pytest

from artifact.analyze import metrics, noise
from artifact.core import equations
from artifact.experiments.training import phase_order
from artifact.judge.compare import compare
from artifact.rank.modes import OVERLAP_REPEAT, Mode, balanced_order, mode_of, with_repeat
from tests import factories
from tests.conftest import run_cli
from tests.test_compare import _folder, _row

# Eq. 1 on one H200 (docs/measurement.md, fig8 quick): beside NCCL's one-rank kernel, and
# beside a one-rank SUM all-reduce that launches no kernel at all
ONERANK = {"mean": 0.296, "ci_low": 0.280, "ci_high": 0.310}
NO_KERNEL = {"mean": 0.034, "ci_low": 0.011, "ci_high": 0.056}
# an A/A floor of the size Eq. 1 reads on one GPU without communication (0.1-1.5 %)
FLOOR = {"mean": 0.008, "ci_low": -0.009, "ci_high": 0.025}


def test_the_repeat_is_the_overlap_mode_in_the_balanced_order():
    assert mode_of(OVERLAP_REPEAT) is Mode.OVERLAP and mode_of("nocomm") is Mode.NOCOMM
    with pytest.raises(ValueError):
        mode_of("sequential_again")
    phases = with_repeat(("nocomm", "comm_alone", "sequential", "overlap"))
    assert phases == ("nocomm", "comm_alone", "sequential", "overlap", OVERLAP_REPEAT)
    # every phase runs first once in each cycle of the design (2 x 5 rows: odd)
    assert sorted(balanced_order(phases, rep)[0] for rep in range(10)) == sorted(phases * 2)
    assert balanced_order(phases, 12) == balanced_order(phases, 2)


def test_threshold_is_the_far_end_of_the_floors_interval():
    assert noise.threshold(FLOOR) == pytest.approx(0.025)
    assert noise.threshold({"mean": -0.01, "ci_low": -0.03, "ci_high": 0.01}) == 0.03
    # n = 1: no interval, the mean's size
    assert noise.threshold({"mean": -0.012, "ci_low": math.nan, "ci_high": math.nan}) == 0.012
    assert math.isnan(noise.threshold({"mean": math.nan, "ci_low": None, "ci_high": None}))


def test_a_slowdown_well_above_the_floor_clears_it():
    j = noise.judge(ONERANK, FLOOR)
    assert j.cleared is True and j.limit == pytest.approx(0.025)
    assert j.reason == (
        "Eq. 1 is 29.6 % [28 %, 31 %]: it clears the noise floor (A/A: two identical "
        "overlap passes of a repetition differ by up to 2.5 %; floor 0.8 % [-0.9 %, 2.5 %])."
    )
    # a clear speed-up clears it on the other side
    assert noise.judge({"mean": -0.05, "ci_low": -0.06, "ci_high": -0.04}, FLOOR).cleared


def test_a_positive_slowdown_inside_the_floors_interval_is_within_it():
    """3.4 % [1.1, 5.6] is above 0, but an A/A comparison can read up to 2.5 %."""
    j = noise.judge(NO_KERNEL, FLOOR)
    assert j.cleared is False
    assert "is within the noise floor" in j.reason and "up to 2.5 %" in j.reason
    # the far end of the floor's CI, not its mean, is the threshold: against |mean|
    # (0.8 %) the same slowdown would pass
    assert noise.judge(NO_KERNEL, {"mean": 0.008, "ci_low": None, "ci_high": None}).cleared


def test_without_a_floor_nothing_is_judged():
    j = noise.judge(ONERANK, None)
    assert j.cleared is None and "no noise floor was measured" in j.reason
    # a slowdown without a CI (n = 1) is compared through its mean
    assert not noise.judge({"mean": 0.02, "ci_low": math.nan, "ci_high": math.nan}, FLOOR).cleared


def _fig8_rows(floor_onerank, floor_sum):
    """fig8's Eq. 1 and noise-floor rows for two configurations, as summary.csv has them."""
    rows = []
    for cid, par, slow, floor in (
        ("onerank", "proxy-nccl-onerank", ONERANK, floor_onerank),
        ("sum", "allreduce", NO_KERNEL, floor_sum),
    ):
        for metric, v in (("slowdown", slow), ("noise_floor", floor)):
            row = _row(cid, par, v["mean"], v["ci_low"], v["ci_high"], figure="fig8")
            rows.append({**row, "metric": metric})
    return rows


CONFIGS = {"onerank": {"world_size": 1, "note": "proxy: NCCL's one-rank kernel"},
           "sum": {"world_size": 4}}  # fmt: skip


def _claim(out):
    """The shipped claim's paper row, and its proxy evidence by configuration."""
    v = compare(out)
    rows = v[v["item"] == "matmul_slower_beside_allreduce"]
    proxy = rows[rows["item_type"] == "proxy"].set_index("config_id")
    return rows[rows["item_type"] == "claim"].iloc[0], proxy


def test_compare_a_slowdown_claim_within_the_floor_is_inconclusive(tmp_path):
    """The shipped claim 'a matmul runs slower beside a 1 GB all-reduce': the all-reduce's
    CI is above 0 (reproduced without the floor), but not above its floor. The one-GPU
    proxy is judged apart, on its own rows, and never in the paper's row."""
    out = _folder(tmp_path, _fig8_rows(FLOOR, FLOOR), CONFIGS)
    v, proxy = _claim(out)
    assert v["verdict"] == "inconclusive"
    assert v["reason"].startswith(
        "Within the noise floor (A/A check) in 1 of 1 configuration(s): sum: Eq. 1 3.4 % "
        "[1.1 %, 5.6 %], while two identical overlap passes differ by up to 2.5 %. "
        "The CI is above 0 in the one configuration measured"
    )
    assert (v["mean"], v["ci_low"], v["ci_high"]) == (0.034, 0.011, 0.056)  # sum's own CI
    # the proxy's slowdown clears its floor, but no V1 was measured for it: a proxy's
    # verdict needs its V1 to hold (its sequential baseline is the compute alone)
    assert list(proxy.index) == ["onerank"] and proxy.loc["onerank", "verdict"] == "inconclusive"
    assert proxy.loc["onerank", "reason"].startswith("V1 was not measured for onerank")
    assert (
        "Proxy evidence, not counted: proxy: NCCL's one-rank kernel"
        in proxy.loc["onerank", "reason"]
    )


def test_compare_a_slowdown_claim_that_clears_the_floor_is_reproduced(tmp_path):
    quiet = {"mean": 0.001, "ci_low": -0.004, "ci_high": 0.006}  # up to 0.6 %
    out = _folder(tmp_path, _fig8_rows(FLOOR, quiet), CONFIGS)
    v, _ = _claim(out)
    assert v["verdict"] == "reproduced"
    assert v["reason"] == (
        "The CI is above 0 in the one configuration measured. Every slowdown clears its noise floor "
        "(the A/A check of two overlap passes). No negative control was measured for sum."
    )


def test_the_floor_gates_only_claims_that_overlap_slows_compute(tmp_path):
    claim = factories.expected_item(kind="every_row_positive", metric="slowdown")
    assert noise.applies(claim)
    assert not noise.applies(replace(claim, metric="peak_power_increase"))
    assert not noise.applies(replace(claim, kind="group_greater"))  # slowdowns against each other
    number = factories.expected_item(section="numbers", metric="slowdown", aggregate="mean")
    assert not noise.applies(number)
    rows = pd.DataFrame(_fig8_rows(FLOOR, FLOOR))
    verdict = factories.verdict(verdict="not reproduced", reason="Not above 0.")
    assert noise.gate(verdict, claim, rows, rows) == verdict  # only 'reproduced' can fall


@pytest.fixture(scope="module")
def fsdp_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("noise")
    res = run_cli(
        *("run", "fig4", "--preset", "tiny", "--models", "gpt-tiny", "--parallelisms", "fsdp"),
        *("--reps", "2", "--out", str(out)),
        timeout=600,
    )
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    return out


CONFIG = "gpt-tiny_fsdp_fp32_mb2_w2"


@pytest.mark.slow
def test_records_hold_the_repeat_and_the_controls_in_the_balanced_order(fsdp_run):
    """DeepSpeed ZeRO-3 over 2 gloo processes: every repetition measures the repeat and,
    since two ranks move data, the zero-byte controls, in its row of the Williams design;
    the repeat keeps no trace."""
    recs = [json.loads(p.read_text()) for p in fsdp_run.glob(f"records/fig4/{CONFIG}/*/rep-*.json")]
    by_rep = {}
    for r in sorted(recs, key=lambda r: (r["rep"], r["phase_position"])):
        by_rep.setdefault(r["rep"], []).append(r["mode"])
    assert by_rep == {rep: list(phase_order(rep, world_size=2)) for rep in (0, 1)}
    assert set(by_rep[0]) == {"overlap", "sequential", "nocomm", OVERLAP_REPEAT,
                              "overlap_control", "sequential_control"}  # fmt: skip
    repeat = [r for r in recs if r["mode"] == OVERLAP_REPEAT]
    assert all(r["metrics"]["compute_ms"] > 0 for r in repeat)
    assert all(r["metrics"]["communication_ms"] > 0 for r in repeat)  # it issues collectives
    sequential = [r for r in recs if r["mode"] in ("sequential", "sequential_control")]
    assert all(r["metrics"]["overlap_fraction"] < 0.01 for r in sequential)
    traces = {p.name for p in (fsdp_run / "traces" / "fig4").iterdir()}
    assert f"{CONFIG}-sequential-rank0.json" in traces
    assert not any(OVERLAP_REPEAT in t for t in traces)


@pytest.mark.slow
def test_summary_holds_the_floor_with_a_paired_interval(fsdp_run):
    df = pd.read_csv(fsdp_run / "summary.csv")
    rows = df[df["config_id"] == CONFIG].set_index(["mode", "metric"])
    floor = rows.loc[("derived", "noise_floor")]
    assert floor["kind"] == "derived" and floor["unit"] == "ratio" and floor["n"] == 2
    assert floor["ci_method"] == "paired student-t (delta method)"
    assert floor["ci_low"] <= floor["mean"] <= floor["ci_high"]
    # Eq. 1 between the repeat and overlap, on the means of the two passes
    repeat = rows.loc[(OVERLAP_REPEAT, "compute_ms"), "mean"]
    overlap = rows.loc[("overlap", "compute_ms"), "mean"]
    assert floor["mean"] == pytest.approx(equations.slowdown(repeat, overlap))
    # paired: the same interval describe_derived gives on the records' per-repetition pairs
    recs = [json.loads(p.read_text()) for p in fsdp_run.glob(f"records/fig4/{CONFIG}/*/rep-*.json")]
    per_rep = {
        m: [
            r["metrics"]["compute_ms"]
            for r in sorted(recs, key=lambda r: r["rep"])
            if r["mode"] == m
        ]
        for m in (OVERLAP_REPEAT, "overlap")
    }
    paired = metrics.describe_derived(
        equations.slowdown, per_rep[OVERLAP_REPEAT], per_rep["overlap"]
    )
    assert (floor["ci_low"], floor["ci_high"]) == pytest.approx((paired.ci_low, paired.ci_high))
    # beside the figure's Eq. 1
    assert ("derived", "slowdown") in rows.index
