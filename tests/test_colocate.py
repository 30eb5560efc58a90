"""Co-located ranks (artifact.rank.colocate), the one-GPU mechanism axis
(artifact.core.mechanisms) and the stand-in's validation rows (artifact.judge.standin), on CPU."""

import json
import math

import pandas as pd
import pytest
import torch

from artifact import placement
from artifact.core import mechanisms as mech
from artifact.core.config import get_preset
from artifact.core.options import RunOptions
from artifact.figures import spec_of
from artifact.figures.sweeps import PLANNED_GPU, Where
from artifact.judge import standin
from artifact.rank import colocate
from tests.conftest import ROOT
from tests.factories import record


@pytest.mark.parametrize("w", [2, 4])
def test_w_gloo_ranks_in_threads_all_reduce_correctly_beside_a_matmul(w):
    """The harness's CPU path (the same code as NCCL's, another backend): every rank's
    buffer ends as the sum of all W, while rank 0's thread multiplies matrices."""
    ranks = colocate.Colocated(w, torch.device("cpu"))
    try:
        buf = torch.randn(10_000)
        peers = [ranks._peer_buffer(r, buf) for r in range(1, w)]
        expect = buf + sum(peers)
        a = torch.randn(128, 128)
        work = ranks.all_reduce(buf)
        product = a @ a  # compute on rank 0's thread while the collective runs
        work.wait()
        assert torch.allclose(buf, expect, atol=1e-4)
        assert all(torch.allclose(p, expect, atol=1e-4) for p in peers)
        assert product.shape == (128, 128)
        before = buf.clone()
        ranks.all_reduce(buf[:0], full=buf).wait()  # a zero-byte control moves nothing
        assert torch.equal(buf, before)
    finally:
        ranks.close()


def test_too_old_an_nccl_is_refused_in_one_line_naming_the_version_and_the_wheel():
    why = colocate.refusal((2, 28, 9))
    assert "2.28.9" in why and placement.NCCL_WHEEL in why and "\n" not in why
    assert colocate.refusal((2, 30, 0)) is None and colocate.refusal((2, 32, 3)) is None


def test_the_total_ctas_are_split_across_the_ranks():
    assert colocate.ctas_per_rank(16, 2) == 8 and colocate.ctas_per_rank(16, 4) == 4
    assert colocate.ctas_per_rank(3, 4) == 1 and colocate.ctas_per_rank(None, 4) is None


LOG = """host:1:1 [0] NCCL INFO NCCL version 2.32.3+cuda13.0
host:1:2 [0] NCCL INFO 8 coll channels, 8 collnet channels, 0 nvls channels, 8 p2p channels, 8 p2p channels per peer
host:1:1 [0] NCCL INFO 1048576 Bytes -> Algo 0 proto 0 time 12.0
host:1:1 [0] NCCL INFO 1073741824 Bytes -> Algo 1 proto 2 time 3000.5
"""


def test_nccls_choices_are_read_from_its_log():
    got = colocate.parse_log(LOG, 1 << 30)
    assert got == {
        "nccl_version": "2.32.3",
        "nccl_channels": 8,
        "nccl_algo": "Ring",
        "nccl_proto": "Simple",
    }
    assert colocate.parse_log("nothing", 1 << 30)["nccl_version"] is None
    # NCCL 2.32 names them (an H100's log, two co-located ranks)
    named = "x [0] NCCL INFO AllReduce: 1073741824 Bytes -> Algo RING proto SIMPLE channel{Lo..Hi}={0..7}"
    got = colocate.parse_log(named, 1 << 30)
    assert (got["nccl_algo"], got["nccl_proto"]) == ("Ring", "Simple")


def test_one_gpus_mechanism_axis_on_an_h100():
    every = mech.mechanisms(1, "cuda", (0, 8), "NVIDIA H100 80GB HBM3")
    got = [m for m in every if m.axis == "base"]  # the order and mitigation axes: test_mitigation
    spins = [m.spec["ctas"] for m in got if m.comm == "spin"]
    assert spins == list(mech.SM_HELD)
    shaped = [m for m in got if m.comm == "nccl-shaped" and not m.twin_of]
    assert [m.spec["ctas"] for m in shaped] == [16]  # NCCL's channels on an H100 (package data)
    coloc = {m.spec["ranks"]: m for m in got if m.comm == "coloc"}
    twins = {m.spec["ranks"]: m for m in got if m.twin_of}
    assert set(coloc) == set(twins) == set(mech.COLOCATED_WORLDS)
    assert all(twins[w].twin_of == coloc[w].parallelism for w in twins)
    assert all(m.refused is None for m in got)
    unknown = mech.mechanisms(1, "cuda", (0,), "Some GPU")
    # no link, no channel count: no row at one size runs but co-located ranks at a cap of
    # their own (the mitigation axis's totals), which need neither
    runs = [m.parallelism for m in unknown if not m.every_size and not m.refused]
    assert runs == [f"coloc-nccl-max{c}cta-w{w}" for w in (2, 4) for c in (4, 8, 16)]
    several = [m for m in mech.mechanisms(2, "cuda", (0, 8)) if m.axis == "base"]
    assert [m.comm for m in several] == ["allreduce", "allreduce"]


def test_a_twin_and_its_co_located_ranks_are_queued_the_same_way():
    """The validation compares two kernels, so their launch order must match: both on the
    bench's side stream, ahead of the compute they overlap."""
    from artifact.workloads.microbench import SIDE_STREAM_COMMS

    got = mech.mechanisms(1, "cuda", (0,), "NVIDIA H100 80GB HBM3")
    coloc = {m.parallelism: m for m in got if m.comm == "coloc"}
    twins = [m for m in got if m.twin_of]
    assert twins and all(coloc[t.twin_of].comm in SIDE_STREAM_COMMS for t in twins)
    assert all(t.comm in SIDE_STREAM_COMMS for t in twins)


def test_on_an_amd_gpu_the_ptx_kernels_rows_are_refused_with_why_and_the_rest_run():
    """The NCCL-shaped kernel and the spin read %globaltimer through inline PTX: on an AMD
    GPU (torch's device type is "cuda" there too) their rows are "not run", saying so, even
    with --comm-ctas; the proxies and co-located rows keep their own checks."""
    got = mech.mechanisms(1, "cuda", (0,), "AMD Instinct MI210", comm_ctas=16)
    ptx = [m for m in got if m.comm in ("spin", "nccl-shaped")]
    # the base axis's, and the order axis's compute-first twins of the SMs-held rows
    assert len(ptx) == 2 * len(mech.SM_HELD) + 1 + len(mech.COLOCATED_WORLDS)
    assert all("NVIDIA GPUs only" in m.refused and "MI210" in m.refused for m in ptx)
    assert all(m.refused is None for m in got if m.comm in ("copy", "onerank-avg", "coloc"))


def test_the_plan_prices_the_axis_at_one_size_beside_the_gemms():
    preset = get_preset("quick")
    grid = [(p.mech, p.kind, p.comm_bytes) for p in spec_of("contention").configs(preset)]
    axis = [(m, k, b) for m, k, b in grid if not m.every_size]
    assert {b for _, _, b in axis} == {preset.contention.mechanism_at_bytes}
    assert {k.compute for _, k, _ in axis} == {"gemm"}
    gemms = sum(k.compute == "gemm" for k in preset.contention.computes)
    sweep = preset.contention  # quick's: W = 4's co-located row and twin, two SMs-held sizes
    assert (sweep.colocated_worlds, sweep.sm_held) == ((4,), (16, 32))
    assert len(axis) == gemms * (len(sweep.sm_held) + 1 + 2 * len(sweep.colocated_worlds))
    held = sorted(m.spec["ctas"] for m, _, _ in axis if m.comm == "spin")
    assert held == [16, 32]
    assert {m.spec["ranks"] for m, _, _ in axis if m.comm == "coloc" or m.twin_of} == {4}


def test_colocate_2_runs_w2_at_quick_and_the_paper_preset_runs_every_mechanism_row():
    """quick narrows its mechanism rows (a 15-minute first run); --colocate W still runs
    the rows of W, and a preset without the narrowing runs every world and size."""
    w2 = Where(get_preset("quick"), 1, "cuda", PLANNED_GPU, RunOptions(colocate=2))
    rows = [p.mech for p in spec_of("contention").configs(w2) if not p.mech.every_size]
    assert {m.spec["ranks"] for m in rows if m.comm == "coloc" or m.twin_of} == {2}
    paper = get_preset("paper")
    every = [
        p.mech
        for p in spec_of("contention").configs(paper)
        if not p.mech.every_size and p.mech.axis == "base"
    ]
    gemms = sum(k.compute == "gemm" for k in paper.contention.computes)
    assert len(every) == gemms * (len(mech.SM_HELD) + 1 + 2 * len(mech.COLOCATED_WORLDS))


def _row(config_id, mean, lo, hi, n=5, metric="slowdown_beyond_control"):
    return {
        "figure": "contention",
        "config_id": config_id,
        "mode": "derived",
        "metric": metric,
        "mean": mean,
        "ci_low": lo,
        "ci_high": hi,
        "n": n,
    }


CONFIGS = {
    "twin": {
        "twin_of": "coloc-w2",
        "model": "gemm-bf16",
        "comm_bytes": 1 << 30,
        "ranks": 2,
        "ctas": 16,
        "paced_to_ms": 4.0,
        "parallelism": "standin-16cta-coloc-w2",
    },
    "real": {"model": "gemm-bf16", "comm_bytes": 1 << 30, "parallelism": "coloc-w2"},
}


@pytest.mark.parametrize(
    "twin, real, verdict",
    [
        ((0.200, 0.195, 0.205), (0.190, 0.185, 0.195), "holds"),  # 1 point apart, tight
        ((0.300, 0.295, 0.305), (0.190, 0.185, 0.195), "fails"),  # 11 points apart
        ((0.200, 0.100, 0.300), (0.190, 0.185, 0.195), "inconclusive"),  # too wide to tell
    ],
)
def test_the_stand_in_is_validated_only_where_the_whole_difference_ci_is_within_3_points(
    twin, real, verdict
):
    summary = pd.DataFrame([_row("twin", *twin), _row("real", *real)])
    (row,) = standin.verdict_rows(summary, CONFIGS, "contention")
    assert row["verdict"] == verdict and row["item_type"] == "check"
    assert math.isclose(row["mean"], twin[0] - real[0])
    assert row["ci_low"] < row["mean"] < row["ci_high"]
    assert row["reason"].lower().startswith(standin.WORDS[verdict])


def test_a_twin_without_its_co_located_rows_is_not_run():
    summary = pd.DataFrame([_row("twin", 0.2, 0.19, 0.21)])
    (row,) = standin.verdict_rows(summary, {"twin": CONFIGS["twin"]}, "contention")
    assert row["verdict"] == "not run" and "coloc-w2" in row["reason"]


def test_a_co_located_row_carries_nccls_choices_probed_once_a_size(monkeypatch):
    from types import SimpleNamespace

    from artifact.experiments import fig8
    from artifact.rank.runner import ConfigPoint
    from artifact.workloads.microbench import MicrobenchSpec

    calls = []

    def probe(world, ctas, nbytes):
        calls.append((world, ctas, nbytes))
        return {
            "nccl_version": "2.32.3",
            "nccl_channels": 8,
            "nccl_algo": "Ring",
            "nccl_proto": "Simple",
        }

    monkeypatch.setattr(colocate, "probe", probe)
    ctx = SimpleNamespace(device=torch.device("cuda"))  # only its type is read
    spec = MicrobenchSpec(256, "bf16", 1 << 30, 8, "coloc", ranks=2, max_ctas=16)
    seen = {}
    for k in range(2):
        got = fig8.with_nccl_choices(ctx, seen, ConfigPoint(f"c{k}", {"comm": "coloc"}, spec))
        assert got.config["nccl_algo"] == "Ring" and got.config["nccl_channels"] == 8
    assert calls == [(2, 16, 1 << 30)]
    copy = ConfigPoint("x", {"comm": "copy"}, MicrobenchSpec(256, "bf16", 1 << 30, 8, "copy"))
    assert fig8.with_nccl_choices(ctx, seen, copy) is copy


def test_what_the_worker_sets_for_co_location_is_not_part_of_the_environment_fingerprint():
    """The contention map's ranks set colocate.NCCL_ENV; a variable that provenance
    records would make its records differ in environment from the other figures of the
    folder, and summarize refuse them."""
    from artifact import env

    assert not set(colocate.NCCL_ENV) & set(env.COMM_ENV_VARS)


def test_a_resumed_twin_keeps_the_pace_its_records_ran_at(tmp_path):
    """Resuming a twin in a new process must not pace it to a freshly measured time: one
    row, one pace (the records on disk say which)."""
    from types import SimpleNamespace

    from artifact.experiments.contention import _earlier_pace
    from artifact.store import RunStore

    store = RunStore(tmp_path)
    ctx = SimpleNamespace(store=store, figure="contention", is_writer=True)
    assert _earlier_pace(ctx, "twin") is None  # nothing on disk: measure it
    for rep, cfg in enumerate([{"paced_to_ms": 4.25}, {"paced_to_ms": 4.25}]):
        path = store.record_path("contention", "twin", "overlap", rep)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(record("contention", "twin", "overlap", rep, config=cfg)))
    assert _earlier_pace(ctx, "twin") == 4.25
    assert _earlier_pace(ctx, "other") is None


@pytest.mark.parametrize("beside, verdict", [(0.20, "inconclusive"), (0.90, "fails")])
def test_no_validation_where_co_located_nccl_did_not_run_beside_the_compute(beside, verdict):
    """11 points apart fails the stand-in only where co-located NCCL overlapped the compute;
    where its collective ran mostly outside the compute, nothing is compared."""
    rows = [_row("twin", 0.300, 0.295, 0.305), _row("real", 0.190, 0.185, 0.195)]
    for cid, frac in (("twin", 0.95), ("real", beside)):
        rows.append(
            {
                **_row(cid, frac, frac - 0.02, frac + 0.02, metric="overlap_fraction"),
                "mode": "overlap",
            }
        )
    (row,) = standin.verdict_rows(pd.DataFrame(rows), CONFIGS, "contention")
    assert row["verdict"] == verdict
    assert ("did not run side by side" in row["reason"]) == (verdict == "inconclusive")


def test_the_package_datas_h100_validation_is_what_its_records_give():
    """artifact/data/standin_validation.json against the run it names, judged again here."""
    from artifact.core.emulated import validations
    from artifact.results import Results

    runs = validations("NVIDIA H100 80GB HBM3")
    assert {r["world"] for r in runs} == {2, 4}
    for entry in runs:
        run = Results.load(ROOT / entry["records"])
        rows = {
            r["config_id"]: r for r in standin.verdict_rows(run.summary, run.configs, "contention")
        }
        row = rows[entry["config_id"]]
        assert row["verdict"] == entry["verdict"]
        got = [round(100 * row[k], 2) for k in ("mean", "ci_low", "ci_high")]
        assert got == pytest.approx(entry["points"], abs=0.005)
        assert run.provenance["git_commit"].startswith(entry["commit"])


def test_an_emulated_rows_note_says_what_the_validation_read_at_its_world():
    from artifact.core.emulated import NOT_VALIDATED, note, validation_sentence

    h100 = "NVIDIA H100 80GB HBM3"
    at4 = note(4, "nccl-shaped", 16, h100)
    assert "stand-in not validated at W = 4 on H100 (inconclusive: " in at4
    assert "+2.9 points [+2.3, +3.5]" in at4  # read vs nocomm: V1 fails on those rows
    assert "stand-in validated at W = 2 on H100 (validated: " in note(2, "nccl-shaped", 16, h100)
    assert f"{NOT_VALIDATED} at W = 8" in note(8, "nccl-shaped", 16, h100)
    assert f"{NOT_VALIDATED} at W = 4" in note(4, "nccl-shaped", 8, "NVIDIA A100-SXM4-80GB")
    assert note(4, "copy", None, h100).endswith(f"{NOT_VALIDATED})")  # the copies are not checked
    assert "validated at W = 2" in validation_sentence(h100)
    assert "inconclusive at W = 4" in validation_sentence(h100)
    assert "not been measured on NVIDIA A100" in validation_sentence("NVIDIA A100")


def test_only_the_maps_every_size_rows_hold_the_power_window():
    """Power is read from the heat map's rows at one size; the mechanism rows' tables read
    none, so their phases hold no 1 s window (and the plan prices them without it)."""
    from artifact.estimate import model

    sweep = get_preset("quick").contention
    at = sweep.power_at_bytes
    assert sweep.power_window_at(at, True) == sweep.power_window_s == 1.0
    assert sweep.power_window_at(at, False) == 0.0
    assert sweep.power_window_at(16 << 20, True) == 0.0
    rows = model.build(get_preset("quick"), ["contention"], 1, 80.0)
    at_size = [r for r in rows if r.note == "all-reduce 1 GiB"]
    base = [r.time_s for r in at_size if r.parallelism.startswith("proxy-")]
    held = [r.time_s for r in at_size if r.parallelism.startswith("sm-held")]
    assert held and base and max(held) < min(base)
