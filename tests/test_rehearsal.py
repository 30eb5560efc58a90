"""The dress rehearsal (`nox -s rehearsal`): --ranks-per-gpu, its refusals and plan, the
traffic counts, and the functional checks on a 4-process gloo run, planted faults included."""

import json
import os
import stat
from pathlib import Path

import pytest
import torch

from artifact import placement
from artifact.core import traffic
from artifact.core.config import get_preset
from artifact.core.errors import ArtifactError
from artifact.estimate import model
from artifact.judge import rehearsal as checks
from artifact.judge.verdicts import Verdict
from artifact.rank import emulation, mps
from artifact.store import RunStore
from tests import factories
from tests.conftest import run_cli

# --- placement: the device map and the refusals -----------------------------------------


def test_local_rank_r_takes_gpu_r_over_k():
    assert [placement.device_index(r, 4) for r in range(8)] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert [placement.device_index(r, 1) for r in range(3)] == [0, 1, 2]
    assert [placement.device_index(r, 2) for r in range(4)] == [0, 0, 1, 1]


def test_the_ranks_are_told_k_and_what_nccl_needs_for_it():
    assert placement.rank_env(1) == {}
    env = placement.rank_env(4)
    assert env[placement.ENV] == "4"
    assert env["NCCL_MULTI_RANK_GPU_ENABLE"] == "1" and env["NCCL_NVLS_ENABLE"] == "0"
    assert placement.per_gpu(env) == 4 and placement.per_gpu({}) == 1


def test_the_worker_maps_its_device_and_tells_deepspeed(monkeypatch):
    """DeepSpeed's zero.Init reads LOCAL_RANK for its device: with K = 4, local rank 3
    must read GPU 0 there too."""
    from artifact.rank import worker

    chosen = []
    monkeypatch.setattr(torch.cuda, "set_device", chosen.append)
    monkeypatch.setenv(placement.ENV, "4")
    monkeypatch.setenv("LOCAL_RANK", "3")
    device = worker._device("cuda", 3)
    assert device == torch.device("cuda", 0) and chosen == [0]
    assert os.environ["LOCAL_RANK"] == "0" and os.environ["ARTIFACT_NODE_LOCAL_RANK"] == "3"
    monkeypatch.setenv(placement.ENV, "1")
    monkeypatch.setenv("LOCAL_RANK", "1")
    assert worker._device("cuda", 1) == torch.device("cuda", 1) and chosen[-1] == 1
    assert os.environ["LOCAL_RANK"] == "1"


@pytest.mark.parametrize(
    ("world", "k", "present", "gpus"), [(4, 4, 1, 1), (4, 2, 2, 2), (4, 1, 4, 4), (8, 4, 2, 2)]
)
def test_layout_places_the_world(world, k, present, gpus):
    assert placement.layout(world, k, present) == gpus


def test_layout_refuses_a_k_that_does_not_divide_the_world():
    with pytest.raises(ArtifactError) as e:
        placement.layout(4, 3, 1)
    assert "--ranks-per-gpu 3" in str(e.value) and "accepted: 1, 2, 4" in str(e.value)


def test_layout_refuses_too_few_gpus():
    with pytest.raises(ArtifactError) as e:
        placement.layout(4, 1, 1)
    assert "has 1" in str(e.value) and "accepted: 4 or more" in str(e.value)


def test_a_cpu_and_emulation_are_refused():
    with pytest.raises(ArtifactError, match="on the CPU"):
        placement.check(4, "cpu")
    with pytest.raises(ArtifactError, match="--emulate-world"):
        placement.check(2, "cuda", 4)
    placement.check(1, "cpu")  # one rank a GPU is every run's default
    placement.check(4, "cuda")


def test_an_old_nccl_is_refused_with_its_version_and_the_install_line():
    with pytest.raises(ArtifactError) as e:
        placement.check_nccl(4, (2, 28, 9))
    text = str(e.value)
    assert "--ranks-per-gpu 4" in text and "2.28.9" in text
    assert "pip install --no-deps nvidia-nccl-cu13==2.32.3" in text and "\n" not in text
    placement.check_nccl(4, (2, 32, 3))  # new enough: no error


@pytest.mark.slow
@pytest.mark.parametrize(
    "argv",
    [
        ("run", "fig8", "--ranks-per-gpu", "4"),
        ("all", "--ranks-per-gpu", "2"),
        ("rehearsal", "--ranks-per-gpu", "2"),
        ("run", "fig8", "--ranks-per-gpu", "0"),
        ("rehearsal", "--world", "1"),
        ("rehearsal", "--mps", "maybe"),
        ("rehearsal", "--gpus", "2"),
    ],
)
def test_the_cli_refuses_in_one_line_before_anything_is_written(argv, tmp_path):
    out = tmp_path / "out"
    res = run_cli(*argv, "--out", str(out), timeout=120)
    assert res.returncode == 2, res.stderr
    lines = [x for x in res.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), res.stderr
    assert not out.exists()


# --- the plan: K ranks' memory on one GPU -------------------------------------------------


def test_the_plan_prices_k_ranks_on_one_gpu():
    """Each row's memory is K ranks' estimate at W = GPUs x K, and it fits only where
    those K fit the GPU."""
    quick = get_preset("quick")
    shared = model.build(quick, ["fig4"], 1, 80, per_gpu=4)
    alone = model.build(quick, ["fig4"], 4, 80)
    pairs = [
        (s, a)
        for s, a in zip(shared, alone, strict=True)
        if s.memory_gib is not None and s.method != "start-up"
    ]
    assert pairs
    for s, a in pairs:
        assert s.gpus == 4 == a.gpus
        assert s.memory_gib == pytest.approx(4 * a.memory_gib)
        assert s.fits == (a.memory_gib * 4 * 1.1 <= 80)
    assert any(not s.fits for s, _ in pairs) and any(s.fits for s, _ in pairs)


# --- the counts' formulas ------------------------------------------------------------------


@pytest.mark.parametrize("numel", [1, 2, 3, 5, 8, 13, 64])
def test_ring_bytes_of_an_all_reduce_are_what_the_emulation_copies(numel):
    emulation.TRAFFIC.clear()
    emulation._all_reduce(torch.ones(numel), 4)
    assert traffic.ring_bytes("all_reduce", numel, 4, 4) == emulation.TRAFFIC["all_reduce"]


def test_ring_bytes_of_gathers_scatters_and_one_rank():
    assert traffic.ring_bytes("all_gather_into_tensor", 400, 2, 4) == 3 * 100 * 2
    assert traffic.ring_bytes("reduce_scatter_tensor", 400, 4, 4) == 3 * 100 * 4
    assert traffic.ring_bytes("broadcast", 10, 4, 4) == 40
    assert traffic.ring_bytes("all_reduce", 10, 4, 1) == 0


def test_a_pipeline_stage_sends_and_receives_its_1f1b_tensors():
    act = 1000
    assert traffic.pipeline_p2p_bytes(0, 4, 4, act) == (4000, 4000)
    assert traffic.pipeline_p2p_bytes(1, 4, 4, act) == (8000, 8000)
    assert traffic.pipeline_p2p_bytes(3, 4, 4, act) == (4000, 4000)
    assert traffic.pipeline_p2p_bytes(0, 1, 4, act) == (0, 0)


# --- MPS: the run's own daemon ---------------------------------------------------------------


def _fake_control(tmp_path: Path, rc: int = 0) -> Path:
    """A stand-in for nvidia-cuda-mps-control that logs its arguments, stdin and pipe folder."""
    log = tmp_path / "control.log"
    script = tmp_path / "nvidia-cuda-mps-control"
    script.write_text(
        "#!/bin/sh\n"
        f'echo "args=$* pipe=$CUDA_MPS_PIPE_DIRECTORY log=$CUDA_MPS_LOG_DIRECTORY" >> {log}\n'
        f'[ "$1" = -d ] || {{ cat >> {log}; }}\n'
        f"exit {rc}\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return script


def test_the_daemon_is_the_runs_own_and_stopped_after(tmp_path):
    control = _fake_control(tmp_path)
    out = tmp_path / "run"
    with mps.daemon(out, control=str(control)) as env:
        assert env[mps.ENV] == "1"
        assert env["CUDA_MPS_LOG_DIRECTORY"] == str(out / "logs" / "mps")
        assert Path(env["CUDA_MPS_PIPE_DIRECTORY"]).is_dir()
    lines = (tmp_path / "control.log").read_text().splitlines()
    assert lines[0].startswith("args=-d pipe=") and f"log={out / 'logs' / 'mps'}" in lines[0]
    assert lines[1].startswith("args= pipe=") and lines[2] == "quit"  # stopped on exit
    assert mps.in_use({mps.ENV: "1"}) and not mps.in_use({})


def test_a_daemon_that_does_not_start_is_one_line(tmp_path):
    with (
        pytest.raises(ArtifactError, match="--mps off"),
        mps.daemon(tmp_path / "run", control=str(_fake_control(tmp_path, rc=1))),
    ):
        pass
    with (
        pytest.raises(ArtifactError, match="on PATH"),
        mps.daemon(tmp_path / "run", control="no-such-mps-control"),
    ):
        pass


def test_a_long_run_folder_keeps_the_pipe_short(tmp_path):
    deep = tmp_path / ("x" * 90)
    pipe, log = mps.folders(deep)
    assert len(str(pipe)) <= 80 and log == deep / "logs" / "mps"


# --- the functional checks on a real 4-process gloo run -------------------------------------


@pytest.fixture(scope="module")
def gloo_rehearsal(tmp_path_factory):
    """fig4 at preset rehearsal over 4 gloo processes (DeepSpeed ZeRO-3, FSDP2, the
    4-stage Megatron-core pipeline) and its emulated reference: the rehearsal's training
    path, as `nox -s rehearsal` runs it on a CPU."""
    out = tmp_path_factory.mktemp("rehearsal") / "run"
    common = ("--preset", "rehearsal", "--fsdp-impl", "deepspeed,fsdp2", "--device", "cpu")
    res = run_cli("run", "fig4", *common, "--nproc", "4", "--out", str(out), timeout=600)
    assert res.returncode == 0, res.stderr[-2000:]
    ref = ("--emulate-world", "4", "--parallelisms", "fsdp", "--reps", "1")
    res = run_cli("run", "fig4", *common, *ref, "--out", str(out / checks.REFERENCE), timeout=600)
    assert res.returncode == 0, res.stderr[-2000:]
    return out


def _verdicts(out: Path) -> dict[str, Verdict]:
    rows = checks.check_rows(*checks.load(out))
    return {r.item: r for r in rows}


@pytest.mark.slow
def test_every_functional_check_holds_on_four_gloo_ranks(gloo_rehearsal):
    found = _verdicts(gloo_rehearsal)
    assert {k: v.verdict for k, v in found.items()} == dict.fromkeys(checks.ITEMS, "holds")
    records = RunStore(gloo_rehearsal).records("fig4")
    assert {r["provenance"]["world_size"] for r in records} == {4}
    assert {r["provenance"]["ranks_per_gpu"] for r in records} == {1}
    # the real counts, not zeros: 4 ranks of ZeRO-3 each moved data, the same amount
    zero3 = next(
        r
        for r in records
        if r["config_id"] == "gpt-tiny4_fsdp_fp32_mb2_w4" and r["mode"] == "overlap"
    )
    moved = [p["comm_mib_per_step"] for p in zero3["per_rank"]]
    assert len(moved) == 4 and min(moved) > 0 and len(set(moved)) == 1


def _planted(src: Path, dst: Path, plant) -> Path:
    """A copy of the run whose records `plant(record)` changes (a record it returns True for
    is rewritten)."""
    import shutil

    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("traces"))
    for path in sorted((dst / "records").glob("**/rep-*.json")):
        record = json.loads(path.read_text())
        if plant(record):
            path.write_text(json.dumps(record))
    return dst


def _first(config: str, mode: str, rep: int = 0):
    """A planter that edits the first matching record once, through `edit(record)`."""

    def planter(edit):
        done = []

        def plant(r):
            if done or r["config_id"] != config or r["mode"] != mode or r["rep"] != rep:
                return False
            edit(r)
            done.append(True)
            return True

        return plant

    return planter


ZERO3 = "gpt-tiny4_fsdp_fp32_mb2_w4"
PIPE = "gpt-tiny4_pipeline_fp32_mb2_w4"


def _skip_one_collective(r):
    """Rank 2 issued one collective fewer (and moved its bytes less)."""
    p = r["per_rank"][2]
    p["comm_calls_per_step"] -= 1
    p["comm_mib_per_step"] -= 0.0625


def _wrong_bytes(r):
    r["per_rank"][1]["comm_mib_per_step"] *= 1.5


def _stage_sent_too_little(r):
    r["per_rank"][1]["p2p_sent_mib_per_step"] /= 2


def _control_moved_bytes(r):
    r["per_rank"][0]["comm_mib_per_step"] = 0.5


def _a_rank_lost(r):
    r["per_rank"].pop()


def _a_rank_lost_a_number(r):
    del r["per_rank"][3]["e2e_ms"]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("config", "mode", "edit", "breaks"),
    [
        (
            # its overlap_control now issues more than its mode: the control check sees it too
            *(ZERO3, "overlap", _skip_one_collective),
            {"rehearsal_collectives", "rehearsal_bytes", "rehearsal_zero_bytes"},
        ),
        (ZERO3, "sequential", _wrong_bytes, {"rehearsal_bytes"}),
        (PIPE, "overlap", _stage_sent_too_little, {"rehearsal_bytes"}),
        (ZERO3, "overlap_control", _control_moved_bytes, {"rehearsal_zero_bytes"}),
        (PIPE, "nocomm", _a_rank_lost, {"rehearsal_ranks"}),
        (ZERO3, "nocomm", _a_rank_lost_a_number, {"rehearsal_ranks"}),
    ],
)
def test_each_planted_fault_fails_its_check(gloo_rehearsal, tmp_path, config, mode, edit, breaks):
    planted = _planted(gloo_rehearsal, tmp_path / "planted", _first(config, mode)(edit))
    found = _verdicts(planted)
    assert {k for k, v in found.items() if v.verdict == "fails"} == breaks
    for item in breaks:  # the reason names where it broke
        assert config in found[item].reason and mode in found[item].reason


@pytest.mark.slow
def test_without_its_reference_the_bytes_check_fails_and_says_why(gloo_rehearsal, tmp_path):
    import shutil

    bare = tmp_path / "bare"
    shutil.copytree(gloo_rehearsal, bare, ignore=shutil.ignore_patterns("traces", checks.REFERENCE))
    found = _verdicts(bare)
    assert found["rehearsal_bytes"].verdict == "fails"
    assert "no reference" in found["rehearsal_bytes"].reason
    assert found["rehearsal_collectives"].verdict == "holds"


@pytest.mark.slow
def test_a_rehearsal_judges_no_paper_item_and_its_report_says_so(gloo_rehearsal, tmp_path):
    import shutil

    out = tmp_path / "run"
    shutil.copytree(gloo_rehearsal, out, ignore=shutil.ignore_patterns("traces"))
    for stage in ("summarize", "compare", "report"):
        res = run_cli(stage, str(out), timeout=300)
        assert res.returncode == 0, res.stderr[-2000:]
    import pandas as pd

    v = pd.read_csv(out / "verdicts.csv")
    paper = v[v["item_type"].isin(["number", "claim"])]
    assert len(paper) and set(paper["verdict"]) == {"not applicable"}
    assert paper["reason"].str.contains("dress rehearsal").all()
    mine = v[v["figure"] == checks.FIGURE]
    assert dict(zip(mine["item"], mine["verdict"], strict=True)) == dict.fromkeys(
        checks.ITEMS, "holds"
    )
    first = (out / "report" / "appendix.md").read_text().split("\n\n")[1]
    assert first.startswith("**Dress rehearsal of the multi-GPU path: 4 ranks as gloo processes")
    assert "4 of 4 functional checks hold" in first
    from tests.test_glossary import _missing  # every term the rehearsal's report uses

    report = (out / "report" / "appendix.md").read_text()
    assert not _missing(report[: report.index("# I. Glossary")])


def test_a_record_without_e2e_has_every_rank_when_each_reports_alike():
    """fig7's power-trace records carry power, not E2E: every rank's numbers are there, so
    the ranks check holds (it failed on the first GPU run that reached fig7)."""
    ranks = [{"power_compute_pct_tdp": 80.0 + k, "samples": 12.0} for k in range(4)]
    record = factories.record("fig7", "m", "trace", 0, config={"world_size": 4}, per_rank=ranks)
    assert checks.ranks_check([record]) == []
    ranks[2] = {"samples": 12.0}
    assert checks.ranks_check([record]) == ["m trace rep 0 rank 2: no power_compute_pct_tdp"]


def test_the_checks_read_nothing_as_not_run():
    found = {r.item: r for r in checks.check_rows([], [], [])}
    assert {v.verdict for v in found.values()} == {"not run"}


# --- what the first GPU rehearsal found ---------------------------------------------------


def _blocks_worker(rank, port, results):
    """Two gloo ranks whose blocks take 0.1 s and 0.25 s by their own (injected) clocks."""
    import torch.distributed as dist

    from artifact.core.phases import FIG7_BLOCKS
    from artifact.experiments.fig7 import block_iterations

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    ticks = iter([0.0, 0.1 if rank == 0 else 0.25] * len(FIG7_BLOCKS))

    class Ctx:
        device = torch.device("cpu")

    class Bench:
        def run_phase(self, block):
            pass

    results[rank] = block_iterations(Ctx(), Bench(), 1.0, clock=lambda: next(ticks))
    dist.destroy_process_group()


@pytest.mark.slow
def test_fig7s_ranks_run_the_same_iterations_of_each_block():
    """Each rank timed its own blocks, so one issued a collective its peers no longer did:
    4 NCCL ranks on one H100 hung in fig7's power trace. Now they agree on the most."""
    from tests.conftest import spawn_gloo

    found = spawn_gloo(_blocks_worker, 2)
    assert found[0] == found[1]
    assert set(found[0].values()) == {10}  # 1 s of 0.1 s blocks: the faster rank's count


def test_a_rank_sharing_a_gpu_counts_its_share_of_the_free_memory(monkeypatch):
    """K ranks on one GPU: each configuration must fit the GPU's free memory / K, as the
    plan prices it, or it is recorded 'not run' rather than running out of memory."""
    from artifact.rank import capability

    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device: (80 << 30, 80 << 30))
    monkeypatch.setenv(placement.ENV, "4")
    assert capability.free_memory_bytes(torch.device("cuda", 0)) == 20 << 30
    monkeypatch.setenv(placement.ENV, "1")
    assert capability.free_memory_bytes(torch.device("cuda", 0)) == 80 << 30
