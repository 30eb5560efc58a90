"""The contention map and V2 (delay injection) end to end on CPU: 2 gloo processes."""

import json

import pandas as pd
import pytest
import torch

from artifact.store import RunStore
from artifact.workloads.microbench import Microbench, MicrobenchSpec


@pytest.fixture(scope="module")
def beyond_run(tmp_path_factory):
    from tests.conftest import run_cli

    out = tmp_path_factory.mktemp("beyond")
    for experiment in ("contention", "v2"):
        res = run_cli("run", experiment, "--preset", "tiny", "--out", str(out))
        assert res.returncode == 0, res.stdout + res.stderr
    return out


def _rows(out, figure):
    df = pd.read_csv(out / "summary.csv")
    return df[df["figure"] == figure]


@pytest.mark.slow
def test_contention_grid_covers_every_size_and_compute_kind(beyond_run):
    configs = json.loads((beyond_run / "configs.json").read_text())
    grid = {
        (c["model"], c["comm_bytes"]) for c in configs.values() if c.get("compute_size") is not None
    }
    assert grid == {(m, b) for m in ("gemm-fp32", "add-fp32") for b in (256 << 10, 4 << 20)}
    # the memory-bound add has a far lower arithmetic intensity than the GEMM
    intensity = {
        c["model"]: c["intensity_flop_per_byte"] for c in configs.values() if "compute" in c
    }
    assert intensity["add-fp32"] == pytest.approx(1 / 12)  # 1 FLOP per 3 fp32 operands
    assert intensity["gemm-fp32"] == pytest.approx(256 / 6)


@pytest.mark.slow
def test_contention_rows_measure_both_sides_and_the_add(beyond_run):
    df = _rows(beyond_run, "contention")
    derived = df[df["mode"] == "derived"]
    for metric in ("slowdown", "comm_slowdown", "e2e_ideal_ms", "v1_baseline_gap"):
        assert derived[derived["metric"] == metric]["config_id"].nunique() == 4, metric
    add = df[df["model"] == "add-fp32"]
    gbps = add[(add["metric"] == "compute_GBps") & (add["mode"] == "nocomm")]["mean"]
    assert (gbps > 0).all() and len(gbps) == 2
    assert add[add["metric"] == "matmul_tflops"].empty  # no TFLOP/s for an add
    # collectives spread over the compute: the overlap mode overlaps, sequential does not
    ov = df[df["metric"] == "overlap_fraction"].pivot_table(
        index="config_id", columns="mode", values="mean"
    )
    assert (ov["sequential"] < 0.01).all()
    assert (ov["overlap"] > ov["sequential"]).all()


@pytest.mark.slow
def test_v2_injects_a_measured_delay_inside_each_iteration(beyond_run):
    configs = json.loads((beyond_run / "configs.json").read_text())
    v2 = {k: c for k, c in configs.items() if "delay_fraction" in c}
    assert sorted(c["delay_fraction"] for c in v2.values()) == [0.0, 1.0, 3.0]
    assert len({c["comm_repeats"] for c in v2.values()}) == 1  # the delay-free count at every delay
    records = [r for r in RunStore(beyond_run).records() if r["figure"] == "v2"]
    injected = {}
    for r in records:
        fraction = v2[r["config_id"]]["delay_fraction"]
        delay = r["metrics"].get("delay_ms", 0.0)
        if fraction == 0 or r["mode"] == "nocomm":
            assert delay == 0.0
            continue
        # the delay lies on the communication chain, inside the timed iteration
        assert r["metrics"]["e2e_ms"] >= delay > 0
        injected.setdefault(fraction, []).append(delay)
    ratio = (sum(injected[3.0]) / len(injected[3.0])) / (sum(injected[1.0]) / len(injected[1.0]))
    assert 2.0 < ratio < 4.0  # three times the delay, give or take the sleep's granularity


@pytest.mark.slow
def test_report_draws_the_heat_map_and_the_v2_checks(beyond_run):
    from tests.conftest import run_cli

    for cmd in ("compare", "report"):
        res = run_cli(cmd, str(beyond_run))
        assert res.returncode == 0, res.stdout + res.stderr
    md = (beyond_run / "report" / "appendix.md").read_text()
    # V2's section holds its measured table, not the sentence a V2 that did not run gets
    v2 = md[md.index("## V2: delay injection") : md.index("## V3:")]
    assert "A known delay follows every collective" in v2, v2
    assert (beyond_run / "report" / "figures" / "contention.png").stat().st_size > 10_000
    assert (beyond_run / "report" / "figures" / "contention.pdf").stat().st_size > 1_000
    assert "sequential E2E rises by the delay" in md


def test_interleaving_spreads_collectives_over_the_compute_units():
    spec = MicrobenchSpec(16, "fp32", 1 << 10, 4, "allreduce", interleave=True)
    bench = Microbench(spec, torch.device("cpu"))
    bench.comm_repeats = 10
    assert bench._comm_batches("overlap") == [2, 3, 2, 3, 0]  # 10 over 4 units, none after
    assert bench._comm_batches("comm_alone") == [10]
    plain = Microbench(MicrobenchSpec(16, "fp32", 1 << 10, 4, "allreduce"), torch.device("cpu"))
    plain.comm_repeats = 10
    assert plain._comm_batches("sequential") == [10, 0, 0, 0, 0]  # Fig. 8: all first
