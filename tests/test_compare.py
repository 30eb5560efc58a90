"""compare: hand-made summary tables that give every verdict, and schema errors."""

import json
import re

import pandas as pd
import pytest

from artifact.analyze.aggregate import COLUMNS
from artifact.core.errors import ArtifactError
from artifact.judge.compare import compare, load_expected
from artifact.judge.verdicts import VERDICTS
from artifact.store import RunStore
from tests.conftest import run_cli

EXPECTED = """
figure: figX
numbers:
  - id: slowdown_mean
    statement: slowdown is 20 %
    metric: slowdown
    rows: {figure: fig4, mode: derived}
    aggregate: mean
    value: 0.20
    tolerance: 0.05
    tolerance_why: test
    source: {figure: "Fig. 4"}
    scope: any
  - id: mi250_only
    statement: an MI250 number
    metric: slowdown
    rows: {figure: fig4, mode: derived}
    aggregate: max
    value: 0.45
    tolerance: 0.1
    tolerance_why: test
    source: {figure: "Fig. 5"}
    scope: [MI250]
  - id: capped
    statement: a fig9 number
    metric: e2e_ms
    rows: {figure: fig9, mode: overlap}
    aggregate: cap_increase
    value: 1.0
    tolerance: 0.2
    tolerance_why: test
    source: {figure: "Fig. 9"}
    scope: any
claims:
  - id: all_positive
    statement: slowdown > 0 everywhere
    kind: every_row_positive
    metric: slowdown
    rows: {figure: fig4, mode: derived}
    source: {figure: "Fig. 4"}
    scope: any
  - id: fsdp_more
    statement: FSDP slows more than pipeline
    kind: group_greater
    metric: slowdown
    rows: {figure: fig4, mode: derived}
    greater: {parallelism: fsdp}
    lesser: {parallelism: pipeline}
    source: {figure: "Fig. 4"}
    scope: any
  - id: grows_with_size
    statement: slowdown grows with the model
    kind: increases_with
    metric: slowdown
    rows: {figure: fig4, mode: derived, parallelism: fsdp}
    along: params
    source: {figure: "Fig. 4"}
    scope: any
  - id: windows_draw_more
    statement: overlap windows draw more power than compute-only ones
    kind: metric_greater
    rows: {figure: fig7, mode: trace}
    greater_metric: power_overlap_pct_tdp
    lesser_metric: power_compute_only_pct_tdp
    source: {figure: "Fig. 7"}
    scope: any
"""


def _row(
    config,
    parallelism,
    mean,
    lo,
    hi,
    gpu="NVIDIA H200",
    metric="slowdown",
    mode="derived",
    figure="fig4",
):
    return {
        "figure": figure,
        "gpu": gpu,
        "model": "m",
        "parallelism": parallelism,
        "precision": "fp16",
        "mode": mode,
        "metric": metric,
        "mean": mean,
        "std": 0.01,
        "ci_low": lo,
        "ci_high": hi,
        "n": 5,
        "cv": 0.1,
        "noisy": False,
        "unit": "ratio",
        "kind": "derived",
        "config_id": config,
        "note": "",
    }


@pytest.fixture
def expected_dir(tmp_path):
    d = tmp_path / "expected"
    d.mkdir()
    (d / "figX.yaml").write_text(EXPECTED)
    return d


def _folder(tmp_path, rows, configs, comm_ms=5.0):
    """A results folder of `rows`; each configuration's overlap mode ran `comm_ms` of
    communication kernels (0: world size 1, where collectives move no data)."""
    out = tmp_path / "run"
    out.mkdir()
    comm = [
        {
            **r,
            "mode": "overlap",
            "metric": "communication_ms",
            "mean": comm_ms,
            "ci_low": comm_ms,
            "ci_high": comm_ms,
            "unit": "ms",
            "kind": "measured",
        }
        for r in {(r["figure"], r["config_id"]): r for r in rows}.values()
    ]
    pd.DataFrame(rows + comm, columns=list(COLUMNS)).to_csv(out / "summary.csv", index=False)
    (out / "configs.json").write_text(json.dumps(configs))
    return out


def verdicts_of(df):
    return dict(zip(df["item"], df["verdict"], strict=True))


def test_every_verdict(tmp_path, expected_dir):
    rows = [
        _row("small_fsdp", "fsdp", 0.18, 0.16, 0.21),
        _row("big_fsdp", "fsdp", 0.30, 0.27, 0.33),
        _row("small_pp", "pipeline", 0.05, 0.03, 0.07),
    ]
    configs = {
        "small_fsdp": {"params": 1e9},
        "big_fsdp": {"params": 13e9},
        "small_pp": {"params": 1e9},
    }
    out = _folder(tmp_path, rows, configs)
    RunStore(out).write_status("fig9", "not run", "needs --allow-power-cap")
    v = compare(out, expected_dir)
    assert list(v.columns) == [
        "figure",
        "item",
        "expected",
        "tolerance",
        "mean",
        "ci_low",
        "ci_high",
        "verdict",
        "reason",
        "n",  # added by the statistics issue: columns change only by addition
        "ci_method",
        *("statement", "metric", "unit", "kind", "source"),  # added for the report's readers
        "item_type",  # added with the V1/V2 check rows
        "config_id",
        *("counted_in", "same_records_as"),  # each reading counted once, in one tally
    ]
    got = verdicts_of(v)
    # mean of means 0.177, mean CI [0.153, 0.203] meets [0.15, 0.25]
    assert got["slowdown_mean"] == "reproduced"
    assert got["mi250_only"] == "not applicable"
    assert got["capped"] == "not run"
    assert "needs --allow-power-cap" in v.set_index("item").loc["capped", "reason"]
    assert got["all_positive"] == "reproduced"
    assert got["fsdp_more"] == "reproduced"
    assert got["grows_with_size"] == "reproduced"


def test_not_reproduced_says_why(tmp_path, expected_dir):
    """Each claim's CIs show the opposite: a slowdown below 0, FSDP's CIs below the
    pipeline's, the larger model's below the smaller one's."""
    rows = [
        _row("a_fsdp", "fsdp", -0.05, -0.08, -0.02),
        _row("b_fsdp", "fsdp", 0.01, 0.0, 0.02),
        _row("a_pp", "pipeline", 0.10, 0.08, 0.12),
    ]
    configs = {"a_fsdp": {"params": 13e9}, "b_fsdp": {"params": 1e9}, "a_pp": {}}
    v = compare(_folder(tmp_path, rows, configs), expected_dir).set_index("item")
    assert v.loc["slowdown_mean", "verdict"] == "not reproduced"
    assert "lies below [15, 25] %" in v.loc["slowdown_mean", "reason"]
    assert v.loc["all_positive", "verdict"] == "not reproduced"
    assert "At or below 0 in 1 of 3 configurations: a_fsdp" in v.loc["all_positive", "reason"]
    assert v.loc["fsdp_more", "verdict"] == "not reproduced"
    assert "the other way round." in v.loc["fsdp_more", "reason"]
    assert v.loc["grows_with_size", "verdict"] == "not reproduced"


def test_claims_whose_cis_reach_across_are_inconclusive(tmp_path, expected_dir):
    """CIs that reach across the claim's line show neither the claim nor its opposite:
    no verdict either way (it had been "not reproduced")."""
    rows = [
        _row("a_fsdp", "fsdp", 0.02, -0.01, 0.05),
        _row("b_fsdp", "fsdp", 0.01, 0.0, 0.02),
        _row("a_pp", "pipeline", 0.03, 0.01, 0.05),
    ]
    configs = {"a_fsdp": {"params": 1e9}, "b_fsdp": {"params": 13e9}, "a_pp": {}}
    v = compare(_folder(tmp_path, rows, configs), expected_dir).set_index("item")
    for item in ("all_positive", "fsdp_more", "grows_with_size"):
        assert v.loc[item, "verdict"] == "inconclusive", item
    assert "reaches across 0 in 2 of 3 configurations" in v.loc["all_positive", "reason"]
    assert "a_fsdp" in v.loc["all_positive", "reason"]
    assert "the CIs overlap, ordered the other way" in v.loc["fsdp_more", "reason"]
    assert "neighbouring CIs overlap" in v.loc["grows_with_size", "reason"]
    assert v.loc["slowdown_mean", "verdict"] == "not reproduced"  # a number's CI misses


@pytest.mark.parametrize(
    ("overlap", "compute_only", "verdict"),
    [
        ((104, 102, 106), (97, 95, 99), "reproduced"),  # the CIs apart, as claimed
        ((92, 90, 94), (97, 95, 99), "not reproduced"),  # apart, the other way
        ((99, 94, 104), (97, 95, 99), "inconclusive"),  # overlapping: neither
    ],
)
def test_metric_greater_reads_both_cis(tmp_path, expected_dir, overlap, compute_only, verdict):
    def power(metric, mean, lo, hi):
        return _row("p", "allreduce", mean, lo, hi, metric=metric, mode="trace", figure="fig7")

    rows = [
        power("power_overlap_pct_tdp", *overlap),
        power("power_compute_only_pct_tdp", *compute_only),
    ]
    v = compare(_folder(tmp_path, rows, {"p": {}}), expected_dir).set_index("item")
    assert v.loc["windows_draw_more", "verdict"] == verdict


def test_power_cap_increase(tmp_path, expected_dir):
    rows = [
        _row("u", "allreduce", 10.0, 9.9, 10.1, metric="e2e_ms", mode="overlap", figure="fig9"),
        _row("c200", "allreduce", 20.5, 20.4, 20.6, metric="e2e_ms", mode="overlap", figure="fig9"),
        _row("c400", "allreduce", 14.0, 13.9, 14.1, metric="e2e_ms", mode="overlap", figure="fig9"),
    ]
    configs = {
        "u": {"power_cap_w": None},
        "c200": {"power_cap_w": 200.0},
        "c400": {"power_cap_w": 400.0},
    }
    v = compare(_folder(tmp_path, rows, configs), expected_dir).set_index("item")
    assert v.loc["capped", "mean"] == pytest.approx(1.05)  # strictest cap: 20.5 / 10 - 1
    assert v.loc["capped", "verdict"] == "reproduced"


def test_cpu_run_evaluates_no_claim(tmp_path, expected_dir):
    """fig4 ran: its items are not applicable on a CPU. fig7 and fig9 have no records
    here: theirs did not run, which a CPU run says too."""
    rows = [_row("x", "fsdp", 0.5, 0.4, 0.6, gpu="cpu")]
    v = compare(_folder(tmp_path, rows, {}), expected_dir).set_index("item")
    absent = ["capped", "windows_draw_more"]
    assert set(v.drop(index=absent)["verdict"]) == {"not applicable"}
    assert v.drop(index=absent)["reason"].str.startswith("CPU functional check").all()
    assert list(v.loc[absent, "verdict"]) == ["not run", "not run"]
    assert v.loc["capped", "reason"] == "Fig. 9: no records in this folder."


def test_cpu_run_says_which_figures_did_not_run(tmp_path, expected_dir):
    """A CPU run judges nothing, but an item whose figure did not run says so, with the
    figure's reason, rather than "not applicable"."""
    rows = [_row("x", "fsdp", 0.5, 0.4, 0.6, gpu="cpu")]
    out = _folder(tmp_path, rows, {})
    (out / "status").mkdir()
    reason = "opt-in: needs --allow-power-cap"
    status = {"figure": "fig9", "status": "not run", "reason": reason}
    (out / "status" / "fig9.json").write_text(json.dumps(status))
    v = compare(out, expected_dir).set_index("item")
    assert v.loc["capped", "verdict"] == "not run"
    assert v.loc["capped", "reason"] == f"Fig. 9: {reason}."  # as a sentence
    others = v.drop(index=["capped", "windows_draw_more"])  # fig7: no records here
    assert set(others["verdict"]) == {"not applicable"}


def test_the_shipped_expected_files_load():
    items = load_expected()
    ids = {i.id for i in items}
    assert {
        "compute_slowdown_mean",
        "sequential_penalty_max",
        "peak_power_increase_max",
        "fsdp_slows_more_than_pipeline",
        "stricter_cap_slower",
    } <= ids
    assert all(i.tolerance_why for i in items if i.is_number)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("figure: f\nnumbers:\n  - id: a\n", "f.yaml: numbers[0]: missing key 'statement'"),
        (
            "figure: f\nclaims: [{id: a, statement: s, kind: vibes, rows: {}, source: {}, scope: any}]\n",
            "f.yaml: claims[0]: kind 'vibes'; accepted: every_row_positive",
        ),
        (
            "figure: f\nnumbers: [{id: a, statement: s, metric: m, rows: {}, aggregate: mean, value: high, "
            "tolerance: 1, tolerance_why: w, source: {}, scope: any}]\n",
            "f.yaml: numbers[0]: 'value' must be a number, got 'high'",
        ),
        ("figure: [unclosed\n", "f.yaml: not valid YAML"),
        (  # a misspelt key would otherwise be dropped in silence
            "figure: f\nclaims: [{id: a, statement: s, kind: every_row_positive, metric: m, "
            "rows: {}, source: {}, scope: any, tolerence: 1}]\n",
            "f.yaml: claims[0]: unknown key 'tolerence'; accepted: id, statement, rows,",
        ),
    ],
)
def test_malformed_expected_is_a_clear_error(tmp_path, text, message):
    (tmp_path / "f.yaml").write_text(text)
    with pytest.raises(ArtifactError) as e:
        load_expected(tmp_path)
    assert str(e.value).startswith(message)


@pytest.mark.slow
def test_compare_cli_writes_verdicts(tmp_path):
    out = _folder(tmp_path, [_row("x", "fsdp", 0.2, 0.18, 0.22)], {"x": {}})
    res = run_cli("compare", str(out))
    assert res.returncode == 0, res.stderr
    assert (out / "verdicts.csv").is_file()
    # the printed counts are the written table's: every row counted once, by its verdict
    written = pd.read_csv(out / "verdicts.csv", keep_default_na=False)
    line = res.stdout.strip().splitlines()[-1]
    counts = {v.strip(): int(n) for v, n in re.findall(r"([a-z ]+?) (\d+)", line[len("paper: ") :])}
    assert counts == {v: int((written["verdict"] == v).sum()) for v in VERDICTS}
    assert sum(counts.values()) == len(written) == 26
    assert run_cli("compare", str(tmp_path / "nope")).returncode == 2


def test_one_gpu_run_judges_no_overlap_item(tmp_path, expected_dir):
    """World size 1: communication 0 in every mode. Slowdowns read from noise must not
    be judged either way; numbers that need no communication still are."""
    rows = [
        _row("small_fsdp", "fsdp", 0.18, 0.16, 0.21),
        _row("big_fsdp", "fsdp", 0.30, 0.27, 0.33),
        _row("small_pp", "pipeline", 0.05, 0.03, 0.07),
        _row("u", "allreduce", 10.0, 9.9, 10.1, metric="e2e_ms", mode="overlap", figure="fig9"),
        _row("c200", "allreduce", 20.5, 20.4, 20.6, metric="e2e_ms", mode="overlap", figure="fig9"),
    ]
    configs = {
        "small_fsdp": {"params": 1e9},
        "big_fsdp": {"params": 13e9},
        "small_pp": {"params": 1e9},
        "u": {"power_cap_w": None},
        "c200": {"power_cap_w": 200.0},
    }
    v = compare(_folder(tmp_path, rows, configs, comm_ms=0.0), expected_dir).set_index("item")
    for item in ("slowdown_mean", "all_positive", "fsdp_more", "grows_with_size"):
        assert v.loc[item, "verdict"] == "not applicable", item
        assert v.loc[item, "reason"].startswith("No collective between GPUs ran beside compute")
    assert v.loc["capped", "verdict"] == "reproduced"  # e2e under a cap needs no overlap


def test_reasons_are_sentences_not_reprs(tmp_path, expected_dir):
    rows = [_row("a_fsdp", "fsdp", 0.02, -0.01, 0.05), _row("a_pp", "pipeline", 0.03, 0.01, 0.05)]
    v = compare(_folder(tmp_path, rows, {}), expected_dir).set_index("item")
    reason = v.loc["fsdp_more", "reason"]
    assert reason.startswith("Parallelism fsdp") and "parallelism pipeline" in reason
    assert not any(c in reason for c in "{}'"), reason
    assert all(r[0].isupper() and r.endswith((".", ")")) for r in v["reason"]), list(v["reason"])


def test_too_few_repetitions_is_inconclusive(tmp_path, expected_dir):
    """n = 3: the same rows that give 'reproduced' at n = 5 are not judged either way."""
    rows = [
        {**_row("small_fsdp", "fsdp", 0.18, 0.16, 0.21), "n": 3},
        {**_row("big_fsdp", "fsdp", 0.30, 0.27, 0.33), "n": 3},
        {**_row("small_pp", "pipeline", 0.05, 0.03, 0.07), "n": 3},
    ]
    configs = {"small_fsdp": {"params": 1e9}, "big_fsdp": {"params": 13e9}, "small_pp": {}}
    v = compare(_folder(tmp_path, rows, configs), expected_dir).set_index("item")
    for item in ("slowdown_mean", "all_positive", "fsdp_more", "grows_with_size"):
        assert v.loc[item, "verdict"] == "inconclusive", item
        assert v.loc[item, "reason"].startswith("Too few repetitions to judge (n = 3")
        assert v.loc[item, "n"] == 3


def test_fsdp2_rows_are_shown_but_never_judged_against_the_paper(tmp_path, expected_dir):
    """`--fsdp-impl deepspeed,fsdp2`: the paper's items read the ZeRO-3 rows only; FSDP2's
    (beyond the paper) would turn each verdict if they counted."""
    paper = [
        _row("small_fsdp", "fsdp", 0.18, 0.16, 0.21),
        _row("big_fsdp", "fsdp", 0.30, 0.27, 0.33),
        _row("small_pp", "pipeline", 0.05, 0.03, 0.07),
    ]
    beyond = [_row("small_fsdp2", "fsdp", -0.5, -0.6, -0.4)]
    configs = {
        "small_fsdp": {"params": 1e9, "fsdp_impl": "deepspeed"},
        "big_fsdp": {"params": 13e9, "fsdp_impl": "deepspeed"},
        "small_pp": {"params": 1e9},
        "small_fsdp2": {"params": 1e9, "fsdp_impl": "fsdp2"},
    }
    got = verdicts_of(compare(_folder(tmp_path, paper + beyond, configs), expected_dir))
    assert got["slowdown_mean"] == got["all_positive"] == got["fsdp_more"] == "reproduced"
    # the control: the same FSDP2 row labelled as ZeRO-3's is judged, and fails the claims
    configs["small_fsdp2"]["fsdp_impl"] = "deepspeed"
    other = tmp_path / "control"
    other.mkdir()
    got = verdicts_of(compare(_folder(other, paper + beyond, configs), expected_dir))
    assert got["slowdown_mean"] == got["all_positive"] == "not reproduced"


def test_a_configuration_two_figures_share_counts_once():
    """fig8 copies fig6's records (rank/reuse.py) and its power claim pools [fig8, fig6]:
    on one H200 (session 11) the copy counted twice narrowed the CI from [-6.15, +3.21]
    to [-4.78, +1.84]. One configuration, one piece of evidence."""
    from artifact.judge.expected import select
    from artifact.judge.numbers import mean_of_means

    def row(figure, config_id, mean, low, high):
        return {"figure": figure, "config_id": config_id, "mode": "derived"} | {
            "metric": "peak_power_increase",
            "mean": mean,
            "ci_low": low,
            "ci_high": high,
            "n": 5,
        }

    summary = pd.DataFrame(
        [
            row("fig6", "shared", -0.0147, -0.0615, 0.0321),
            row("fig6", "fig6-only", 0.02, 0.01, 0.03),
            row("fig8", "shared", -0.0147, -0.0615, 0.0321),
        ]
    )
    both = select(summary, {"figure": ["fig8", "fig6"], "mode": "derived"}, "peak_power_increase")
    assert sorted(zip(both["figure"], both["config_id"], strict=True)) == [
        ("fig6", "fig6-only"),
        ("fig8", "shared"),
    ]
    shared = both[both["config_id"] == "shared"]
    assert mean_of_means(shared)[1:] == pytest.approx((-0.0615, 0.0321))
