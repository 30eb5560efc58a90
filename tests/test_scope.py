"""Each item of expected/ judged only on evidence that can speak to it (its `needs`)."""

from pathlib import Path

import pytest
import yaml

from artifact.core.errors import ArtifactError
from artifact.judge.compare import compare
from artifact.judge.expected import EXPECTED_DIR, load_expected
from tests.test_compare import _folder, _row

ITEMS = """
figure: figX
numbers:
  - id: peak_large
    statement: peak power reaches 140 % of TDP for large models
    metric: power_peak_pct_tdp
    rows: {figure: fig4, mode: overlap}
    aggregate: max
    value: 140
    tolerance: 15
    tolerance_why: test
    source: {figure: "Fig. 6"}
    scope: any
    needs: {world: 2, min_params_b: 6.7}
  - id: thirteen_b
    statement: a 13B FSDP slowdown
    metric: slowdown
    rows: {figure: fig4, mode: derived, parallelism: fsdp, model: [gpt3-13b, llama2-13b]}
    aggregate: mean
    value: 0.3
    tolerance: 0.1
    tolerance_why: test
    source: {figure: "Fig. 4"}
    scope: any
    needs: {world: 2}
"""


@pytest.fixture
def items_dir(tmp_path):
    d = tmp_path / "expected"
    d.mkdir()
    (d / "figX.yaml").write_text(ITEMS)
    return d


def _run(tmp_path, world: int, model: str = "gpt3-1.3b"):
    rows = [
        _row("c", "fsdp", 150.0, 148.0, 152.0, metric="power_peak_pct_tdp", mode="overlap"),
        _row("c", "fsdp", 0.2, 0.18, 0.22),
    ]
    for r in rows:
        r["model"] = model
        r["unit"] = "%" if r["metric"] == "power_peak_pct_tdp" else "ratio"
    configs = {"c": {"params": 1.3e9, "world_size": world, "model": model}}
    return _folder(tmp_path, rows, configs, comm_ms=5.0 if world > 1 else 0.0)


def test_every_item_of_expected_declares_what_can_speak_to_it():
    for path in sorted(Path(EXPECTED_DIR).glob("*.yaml")):
        doc = yaml.safe_load(path.read_text())
        for section in ("numbers", "claims"):
            for item in doc.get(section) or []:
                needs = item.get("needs")
                assert isinstance(needs, dict) and needs.get("world", 0) >= 2, (
                    f"{path.name}: {item['id']} needs {needs!r}: every paper item is a 4-GPU measurement"
                )


def test_large_model_claims_need_large_models():
    large = [i for i in load_expected() if "large models" in i.statement]
    assert large and all(i.needs.get("min_params_b", 0) >= 6.7 for i in large)


def test_a_one_rank_run_judges_no_four_gpu_item_and_says_what_it_lacks(tmp_path, items_dir):
    v = compare(_run(tmp_path, world=1), items_dir).set_index("item")
    for item in ("peak_large", "thirteen_b"):
        assert v.loc[item, "verdict"] == "not applicable"
        assert "Needs 2 or more ranks exchanging data" in v.loc[item, "reason"]
        assert "ran 1 rank" in v.loc[item, "reason"]


def test_at_four_ranks_a_small_model_does_not_speak_for_large_ones(tmp_path, items_dir):
    v = compare(_run(tmp_path, world=4), items_dir).set_index("item")
    assert v.loc["peak_large", "verdict"] == "not run"
    assert "6.7B parameters or more" in v.loc["peak_large", "reason"]
    assert "gpt3-1.3b" in v.loc["peak_large", "reason"]
    # the 13B item: its reason names the model it needs and the one the run has
    assert v.loc["thirteen_b", "verdict"] == "not run"
    reason = v.loc["thirteen_b", "reason"]
    assert "Needs model gpt3-13b or llama2-13b; this run has gpt3-1.3b" in reason


def test_a_large_model_at_four_ranks_is_judged(tmp_path, items_dir):
    v = compare(_run(tmp_path, world=4, model="gpt3-13b"), items_dir).set_index("item")
    assert v.loc["peak_large", "verdict"] == "reproduced"  # 150 % [148, 152] within 140 +- 15
    assert v.loc["thirteen_b", "verdict"] not in ("not run", "not applicable")


@pytest.mark.parametrize(
    "needs", ["{min_params_b: 6.7}", "{world: 0}", "{world: 2, gpus: 4}", "[2]", "{world: two}"]
)
def test_a_bad_needs_is_one_line_naming_it(tmp_path, needs):
    d = tmp_path / "expected"
    d.mkdir()
    (d / "figX.yaml").write_text(ITEMS.replace("needs: {world: 2}\n", f"needs: {needs}\n"))
    with pytest.raises(ArtifactError) as e:
        load_expected(d)
    assert "needs" in str(e.value) and "accepted" in str(e.value) and "\n" not in str(e.value)


def test_a_reading_counts_once_however_many_items_read_it():
    """fig6's and fig8's peak-power items read the same one-GPU proxy rows (fig8 copies
    fig6's records): one reading each, not two."""
    import pandas as pd

    from artifact.judge.verdicts import readings, tally

    rows = [
        ("fig6", "overlap_raises_peak_power", "peak_power_increase", "copy", "proxy"),
        ("fig6", "overlap_raises_peak_power", "peak_power_increase", "onerank", "proxy"),
        ("fig8", "peak_power_microbench", "peak_power_increase", "copy", ""),
        ("fig8", "peak_power_microbench", "peak_power_increase", "onerank", ""),
        ("fig8", "matmul_slower", "slowdown", "copy", "proxy"),
        ("fig4", "slowdown_mean", "slowdown", "a; b", "preview"),
        ("fig4", "slowdown_fsdp", "slowdown", "a", "preview"),
    ]
    v = pd.DataFrame(rows, columns=["figure", "item", "metric", "config_id", "counted_in"])
    v["item_type"] = ["proxy"] * 5 + ["preview"] * 2
    v["verdict"] = "inconclusive"
    assert readings(v[v["counted_in"] == "proxy"]) == 3
    assert readings(v[v["item_type"] == "preview"]) == 2  # slowdown of a and of b
    line = tally(v)
    assert "proxy evidence (not counted; 3 readings of 2 items): " in line
    assert "inconclusive 3" in line
    assert "emulated preview (not counted; 2 readings of 2 items)" in line


def test_no_tally_of_a_committed_folder_counts_a_reading_twice():
    """The committed H100 folders' verdicts (regenerated): in the proxy and preview tallies
    each (metric, configuration) counts once."""
    import pandas as pd

    from artifact.judge.verdicts import counted
    from tests.conftest import ROOT

    for folder in (
        "results/h100x1/quick-7b9e71c",
        "results/h100x1/emulated-7b9e71c/copy",
        "results/h100x1/emulated-7b9e71c/nccl-shaped",
    ):
        v = pd.read_csv(ROOT / folder / "verdicts.csv", keep_default_na=False)
        for tally in ("proxy", "preview"):
            rows = counted(v, tally)
            rows = rows[rows["config_id"] != ""]
            keys = list(
                zip(
                    rows["metric"],
                    rows["config_id"],
                    rows["item"].where(rows["item"].str.startswith(("control_", "v1_")), ""),
                    strict=True,
                )
            )
            assert len(keys) == len(set(keys)), (folder, tally)
