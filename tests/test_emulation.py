"""--emulate-world W (issue 31): rank 0 of W alone under torch's fake process group."""

import json
import os

import pandas as pd
import pytest
import torch
import torch.distributed as dist

from artifact.core.emulated import check_link, check_world, link_gbs
from artifact.core.errors import ArtifactError
from artifact.core.units import MIB
from artifact.judge.compare import compare
from artifact.judge.verdicts import paper_items, tally
from artifact.rank.modes import Mode, collectives_for, install_collective_modes
from tests.conftest import ROOT, spawn_gloo
from tests.test_compare import EXPECTED, _folder, _row

# --- the flag ---------------------------------------------------------------------------


@pytest.mark.parametrize("bad", ["1", "0", "-4", "x", "2.5", "4.0", ""])
def test_bad_worlds_name_the_value_and_what_is_accepted(bad):
    with pytest.raises(ArtifactError) as e:
        check_world(bad)
    assert repr(bad) in str(e.value) and "2 or more" in str(e.value)
    assert "\n" not in str(e.value)


def test_good_worlds_and_links():
    assert check_world("4") == 4 and check_world(8) == 8
    assert check_link("450") == 450.0
    with pytest.raises(ArtifactError, match="positive"):
        check_link("0")
    assert link_gbs("NVIDIA H200", None) == 450.0
    assert link_gbs("NVIDIA H200", 100.0) == 100.0  # --link-gbps wins
    with pytest.raises(ArtifactError, match="--link-gbps"):
        link_gbs("Some GPU", None)


@pytest.mark.parametrize(
    "flags, named",
    [
        (["--emulate-world", "1"], "--emulate-world '1'"),
        (["--emulate-world", "4", "--nproc", "2"], "--nproc 2"),
        (["--link-gbps", "100"], "--link-gbps"),
    ],
)
@pytest.mark.slow  # over 1.5 s on 2 cores (a CLI process, or a long simulation)
def test_the_cli_refuses_bad_emulation_in_one_line(cli, tmp_path, flags, named):
    r = cli("run", "fig4", "--preset", "tiny", "--out", str(tmp_path / "o"), *flags)
    assert r.returncode == 2, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and named in r.stderr
    assert not (tmp_path / "o").exists()  # refused before anything is written


# --- traffic: the same bytes as real collectives at W = 2 ---------------------------------

SHARD = 5  # elements of rank 0's shard (the gathered buffer is W * SHARD)


def _real(rank: int, port: int, results):
    """Two gloo ranks: what rank 0 receives from its peer, counted in its outputs (the
    seam: elements that hold data rank 0 did not have)."""
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=2)
    shard = torch.full((SHARD,), float(rank + 1))
    gathered = torch.zeros(2 * SHARD)
    dist.all_gather_into_tensor(gathered, shard)
    full = torch.arange(1.0, 2 * SHARD + 1) * (rank + 1)  # no zeros: every sum changes
    scattered = torch.zeros(SHARD)
    dist.reduce_scatter_tensor(scattered, full)
    if rank == 0:
        size = shard.element_size()
        results["all_gather"] = int((gathered == 2.0).sum()) * size  # the peer's values
        own = full.view(2, -1)[0]
        results["reduce_scatter"] = int((scattered != own).sum()) * size  # peer's added
    dist.destroy_process_group()


def _emulated(rank: int, port: int, results):
    """Rank 0 of 2 alone under the fake group: the bytes its emulated traffic moves, by mode."""
    from artifact.rank import emulation

    emulation.join(2, torch.device("cpu"))
    install_collective_modes()
    cpu = torch.device("cpu")
    launched, traffic = [], emulation.traffic

    def counted(*args, **kwargs):  # the seam: which path each collective took
        launched.append(kwargs.get("zero_bytes", args[5] if len(args) > 5 else False))
        return traffic(*args, **kwargs)

    emulation.traffic = counted
    for phase in ("overlap", "sequential", "nocomm", "overlap_control", "sequential_control"):
        emulation.TRAFFIC.clear()
        launched.clear()
        gathered, scattered = torch.zeros(2 * SHARD), torch.zeros(SHARD)
        with torch.profiler.profile() as prof, collectives_for(phase, cpu):
            dist.all_gather_into_tensor(gathered, torch.full((SHARD,), 1.0))
            dist.reduce_scatter_tensor(scattered, torch.arange(1.0, 2 * SHARD + 1))
        results[phase] = (dict(emulation.TRAFFIC), gathered.tolist(), scattered.tolist())
        results[f"{phase} launched"] = list(launched)
        marks = [e.name for e in prof.events() if e.name.startswith("artifact.")]
        results[f"{phase} marks"] = sorted(marks)
    dist.destroy_process_group()


@pytest.fixture(scope="module")
def traffic():
    return spawn_gloo(_real), spawn_gloo(_emulated, nprocs=1)


@pytest.mark.slow
def test_emulated_traffic_moves_what_a_real_rank_0_receives(traffic):
    real, emulated = traffic
    assert real["all_gather"] == real["reduce_scatter"] == SHARD * 4  # (W-1)/W of 2 shards
    for phase in ("overlap", "sequential"):
        moved, gathered, scattered = emulated[phase]
        assert moved == {"all_gather": real["all_gather"], "reduce_scatter": real["reduce_scatter"]}
        assert all(map(torch.isfinite, torch.tensor(gathered + scattered)))
        assert scattered == list(range(1, SHARD + 1))  # rank 0's own unreduced slice, as nocomm


@pytest.mark.slow
def test_nocomm_and_the_zero_byte_controls_move_nothing(traffic):
    _, emulated = traffic
    for phase in ("nocomm", "overlap_control", "sequential_control"):
        moved, gathered, _ = emulated[phase]
        assert sum(moved.values()) == 0, phase
        assert gathered == [1.0] * (2 * SHARD)  # outputs filled all the same


@pytest.mark.slow
def test_a_control_takes_the_path_of_the_bytes_with_none_moved(traffic):
    """Each control collective goes through the emulated traffic's launch (its stream
    order, event and wait on a GPU) as its mode's bytes do, with zero bytes: the control
    differs from the measured phase by the copies alone. nocomm launches nothing."""
    _, emulated = traffic
    for mode in ("overlap", "sequential"):
        assert emulated[f"{mode} launched"] == [False, False]
        assert emulated[f"{mode}_control launched"] == [True, True]
    assert emulated["nocomm launched"] == []


@pytest.mark.slow
def test_a_stand_in_fill_is_marked_for_the_trace_and_the_bytes_are_not(traffic):
    """nocomm and the controls fill the outputs inside STAND_IN_MARK (their kernels are
    memory, not the model's compute); the bytes' copies are inside EMULATED_MARK."""
    from artifact.measure.kernels import EMULATED_MARK, STAND_IN_MARK

    _, emulated = traffic
    assert emulated["nocomm marks"] == [STAND_IN_MARK] * 2
    for mode in ("overlap", "sequential"):
        assert emulated[f"{mode} marks"] == [EMULATED_MARK] * 2
        assert emulated[f"{mode}_control marks"] == sorted([EMULATED_MARK, STAND_IN_MARK] * 2)


@pytest.mark.slow  # over 1.5 s on 2 cores (a CLI process, or a long simulation)
def test_ring_fractions_at_larger_worlds():
    """All-reduce moves 2(W-1)/W of its buffer, gathers (W-1)/W: at W = 4, in one
    process under the fake group (spawned: the group is process-wide)."""
    results = spawn_gloo(_ring_at_4, nprocs=1)
    n, size = 4 * 1024, 4
    assert results["all_reduce"] == 2 * 3 * n * size // 4
    assert results["all_gather"] == 3 * n * size // 4


def _ring_at_4(rank: int, port: int, results):
    from artifact.rank import emulation

    emulation.join(4, torch.device("cpu"))
    install_collective_modes()
    with collectives_for(Mode.OVERLAP.value, torch.device("cpu")):
        dist.all_reduce(torch.ones(4 * 1024))
        dist.all_gather_into_tensor(torch.zeros(4 * 1024), torch.ones(1024))
    results.update(emulation.TRAFFIC)
    dist.destroy_process_group()


# --- compare: emulated rows never enter the paper's tally ---------------------------------


def _expected(tmp_path):
    d = tmp_path / "expected"
    d.mkdir(exist_ok=True)
    (d / "figX.yaml").write_text(EXPECTED)
    return d


EMULATED_NOTE = "emulated: rank 0 of 4 ranks alone on one device"


def _emulated_row(config, parallelism, mean, lo, hi, **kw):
    return _row(config, parallelism, mean, lo, hi, **kw) | {"note": EMULATED_NOTE}


def _v1_holds(*configs):
    """A V1 row that holds for each emulated configuration: a preview's verdict needs it."""
    return [_emulated_row(c, "fsdp", 0.0, -0.003, 0.003, metric="v1_baseline_gap") for c in configs]


def test_emulated_rows_never_enter_the_paper_tally(tmp_path):
    """Rows that would reproduce every number and claim, but emulated: the paper's items
    stay "not run" and the rows appear as a preview. The control: the same rows
    unlabelled are judged, and reproduce."""
    rows = [
        _emulated_row("small_fsdp_e4", "fsdp", 0.18, 0.16, 0.21),
        _emulated_row("big_fsdp_e4", "fsdp", 0.30, 0.27, 0.33),
        _emulated_row("small_pp_e4", "pipeline", 0.05, 0.03, 0.07),
    ]
    configs = {
        "small_fsdp_e4": {"params": 1e9, "emulated_world": 4},
        "big_fsdp_e4": {"params": 13e9, "emulated_world": 4},
        "small_pp_e4": {"params": 1e9, "emulated_world": 4},
    }
    v = compare(_folder(tmp_path, rows, configs), _expected(tmp_path))
    paper = paper_items(v).set_index("item")["verdict"]
    assert "reproduced" not in set(paper), paper
    assert paper["slowdown_mean"] == "not run"
    assert "preview" in v.set_index("item").loc["slowdown_mean", "reason"].iloc[0]
    previews = v[v["item_type"] == "preview"]
    assert set(previews[previews["item"] == "slowdown_mean"]["config_id"]) == set(configs)
    assert "reproduced 0" in tally(v).split(";")[0]  # the paper's part of the line
    assert "emulated preview (not counted; " in tally(v)

    # the control: the same rows unlabelled count
    other = tmp_path / "control"
    other.mkdir()
    plain = [r | {"note": ""} for r in rows]
    plain_configs = {c: {"params": cfg["params"]} for c, cfg in configs.items()}
    v = compare(_folder(other, plain, plain_configs), _expected(tmp_path))
    assert paper_items(v).set_index("item").loc["slowdown_mean", "verdict"] == "reproduced"


def test_a_claim_across_configurations_is_previewed_on_those_of_one_w(tmp_path):
    """FP16 beside FP32, a trend in size: judged on the configurations emulated at one W
    together (one at a time each would read "not run"), never across two W's. The
    control: a W = 2 configuration that would break the trend if it were mixed in."""
    rows = [
        _emulated_row("small_fsdp_e4", "fsdp", 0.18, 0.16, 0.21),
        _emulated_row("big_fsdp_e4", "fsdp", 0.30, 0.27, 0.33),
        _emulated_row("small_pp_e4", "pipeline", 0.05, 0.03, 0.07),
        _emulated_row("mid_fsdp_e2", "fsdp", 0.05, 0.03, 0.07),
        _emulated_row("noted_fsdp", "fsdp", 0.01, 0.00, 0.02),
        *_v1_holds("small_fsdp_e4", "big_fsdp_e4", "small_pp_e4", "mid_fsdp_e2", "noted_fsdp"),
    ]
    configs = {
        "small_fsdp_e4": {"params": 1e9, "emulated_world": 4},
        "big_fsdp_e4": {"params": 13e9, "emulated_world": 4},
        "small_pp_e4": {"params": 1e9, "emulated_world": 4},
        "mid_fsdp_e2": {"params": 5e9},  # W from the id's suffix alone
        "noted_fsdp": {"params": 2e9},  # emulated by its note alone: W unknown, its own
    }
    v = compare(_folder(tmp_path, rows, configs), _expected(tmp_path))
    previews = v[v["item_type"] == "preview"].set_index(["item", "config_id"])["verdict"]
    assert previews[("grows_with_size", "big_fsdp_e4; small_fsdp_e4")] == "reproduced"
    assert previews[("grows_with_size", "mid_fsdp_e2")] == "not run"  # one size at W = 2
    assert previews[("grows_with_size", "noted_fsdp")] == "not run"
    assert previews[("fsdp_more", "big_fsdp_e4; small_fsdp_e4; small_pp_e4")] == "reproduced"
    # a number is still previewed one configuration at a time
    assert len(previews.loc["slowdown_mean"]) == len(configs)
    assert paper_items(v).set_index("item").loc["grows_with_size", "verdict"] == "not run"


# --- the zero-byte control reads no slowdown beyond its floor ---------------------------


def _control_rows(config, mean, lo, hi):
    """An emulated configuration's control reading (Eq. 1 on the zero-byte phases)."""
    return _emulated_row(config, "fsdp", mean, lo, hi, metric="control_slowdown")


@pytest.mark.parametrize(
    "control, verdict",
    [((0.002, -0.004, 0.006), "holds"), ((0.08, 0.06, 0.10), "fails")],
)
def test_a_zero_byte_emulated_overlap_reads_no_slowdown(tmp_path, control, verdict):
    """The emulated zero-byte overlap's Eq. 1 is judged by the controls' rule, as a preview:
    it holds within the margin, and a zero-byte path that slows compute fails (the test's
    own control), so the preview's slowdown is flagged inconclusive."""
    rows = [
        _emulated_row("small_fsdp_e4", "fsdp", 0.18, 0.16, 0.21),
        _control_rows("small_fsdp_e4", *control),
        *_v1_holds("small_fsdp_e4"),
    ]
    configs = {"small_fsdp_e4": {"params": 1e9, "emulated_world": 4, "world_size": 4}}
    v = compare(_folder(tmp_path, rows, configs), _expected(tmp_path))
    ctrl = v[(v["item"] == "control_slowdown") & (v["item_type"] == "preview")]
    assert list(ctrl["verdict"]) == [verdict]
    assert v[v["item_type"] == "control"].empty  # never among the paper's controls
    preview = v[(v["item"] == "slowdown_mean") & (v["item_type"] == "preview")]
    assert (preview["verdict"] == "inconclusive").all() == (verdict == "fails")
    # the emulated configuration's V1 counts with the preview, never among the checks
    assert set(v[v["item"] == "v1_sequential_baseline"]["counted_in"]) == {"preview"}
    assert "checks (V1, V2)" not in tally(v)


# --- a whole run: fig4, tiny, rank 0 of 4 ------------------------------------------------


@pytest.mark.slow
def test_fig4_runs_every_mode_as_rank_0_of_4(cli, tmp_path):
    out = tmp_path / "e4"
    r = cli(
        "run", "fig4", "--preset", "tiny", "--emulate-world", "4", "--models", "gpt-tiny",
        "--fsdp-impl", "deepspeed,fsdp2", "--reps", "1", "--out", str(out), timeout=900,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    records = [json.loads(p.read_text()) for p in (out / "records" / "fig4").rglob("*.json")]
    assert {r["config"]["fsdp_impl"] for r in records} == {"deepspeed", "fsdp2"}
    modes = {r["mode"] for r in records}
    assert modes >= {"overlap", "sequential", "nocomm", "overlap_control", "sequential_control"}
    for rec in records:
        assert rec["config"]["emulated_world"] == 4
        assert rec["config_id"].endswith("_e4") and "_w4" in rec["config_id"]
        assert rec["config"]["note"].startswith("emulated:")
        assert rec["provenance"]["emulated_world"] == 4
        moved = rec["metrics"]["emulated_mib_per_step"] * 2**20
        # the bytes rank 0 moves in the modes that move any, none in the others
        assert (moved > 0) == (rec["mode"] in ("overlap", "sequential", "overlap_repeat"))
        if moved:
            # rank 0's ring share of every parameter (fp32), all-gathered and
            # reduce-scattered: ZeRO-3 keeps its gathered parameters for the backward pass
            # (one all-gather, one reduce-scatter); FSDP2 gathers its blocks again there
            ring = rec["config"]["params"] * 4 * 3 / 4
            if rec["config"]["fsdp_impl"] == "deepspeed":
                assert moved == pytest.approx(2 * ring, rel=0.01)
            else:
                assert 2 * ring < moved < 3 * ring
    status = json.loads((out / "status" / "fig4.json").read_text())
    refused = {c: s for c, s in status["configs"].items() if "pipeline" in c}
    assert refused and all("--emulate-world" in s["reason"] for s in refused.values())
    summary = pd.read_csv(out / "summary.csv")
    assert summary["note"].str.startswith("emulated:").all()
    # the report has the preview's own section, its fidelity paragraph and its rows
    from artifact.judge.compare import write_verdicts
    from artifact.report.build import write_report

    write_verdicts(out)
    text = (write_report(out) / "appendix.md").read_text()
    section = text.split("## Emulated W-GPU preview (one GPU)")[1].split("\n#")[0]
    assert "no pipeline bubble" in section and "gpt-tiny_fsdp2_fp32_mb2_w4_e4" in section
    # one process ran: the hardware line says so, and the W path's zero-byte controls are
    # in the preview (the controls section points there), each with its verdict
    assert "emulated world size 4 (rank 0 of 4 run alone)" in text
    assert "world size 4;" not in text and "world size 4\n" not in text
    assert "its zero-byte controls are in the section" in text
    controls = section.split("Zero-byte controls of the emulated path")[1]
    # (FSDP2 is beyond the paper: measured, judged by nothing, its controls included)
    assert controls.count("| fig4 | gpt-tiny_fsdp_fp32_mb2_w4_e4 | sequential penalty |") == 1


def test_an_emulated_gpu_run_is_not_called_a_reproduction_on_w_gpus():
    from artifact.report.build import _first_line

    summary = pd.DataFrame({"gpu": ["NVIDIA H200"], "config_id": ["a_w4_e4"]})
    verdicts = pd.DataFrame(columns=["item_type", "verdict", "figure", "item"])
    line = _first_line(summary, {"a_w4_e4": {"world_size": 4, "emulated_world": 4}}, verdicts)
    assert line.startswith("**Emulated on 1 x NVIDIA H200: rank 0 of 4 GPUs run alone")
    assert "Reproduction on" not in line and "never counted" in line
    real = _first_line(summary, {"a_w4": {"world_size": 4}}, verdicts)
    assert real.startswith("**Reproduction on 4 x NVIDIA H200**")


# --- the pieces around the run: `all`'s check, the plan, the trace, the report -----------


def test_all_takes_emulate_world_and_refuses_bad_values():
    from artifact.cli import check_run_args

    check_run_args(["--preset", "tiny", "--emulate-world", "4"])  # fig8 leaves it out
    with pytest.raises(ArtifactError, match="--nproc 2"):
        check_run_args(["--preset", "tiny", "--emulate-world", "4", "--nproc", "2"])


def test_the_plan_prices_rank_0_of_w_on_one_device():
    from artifact.core.config import get_preset
    from artifact.estimate.model import build
    from artifact.plan import emulated_plan

    preset = get_preset("quick")
    rows = emulated_plan(preset, ["fig4", "fig8"], 4, 80.0)
    real = {(r.figure, r.model, r.parallelism): r for r in build(preset, ["fig4"], 4, 80.0)}
    fsdp = [r for r in rows if r.figure == "fig4" and r.parallelism == "fsdp"]
    assert fsdp and all("emulated rank 0 of 4" in r.note for r in fsdp)
    for r in fsdp:  # rank 0's shard at W = 4; one rank's traces
        twin = real[(r.figure, r.model, r.parallelism)]
        assert r.memory_gib == twin.memory_gib and r.traces_bytes == twin.traces_bytes // 4
    assert all(not r.runs for r in rows if r.parallelism == "pipeline")
    assert {r.gpus for r in rows if r.figure == "fig8"} == {1}  # not emulated: one GPU


def test_emulated_copies_are_communication_in_a_gpu_trace():
    """A memcpy launched inside the emulated range is communication; the same outside, memory."""
    from artifact.measure import kernels
    from tests.test_kernels import _iter, _kernel, _launch

    mark = {"ph": "X", "cat": "user_annotation", "name": kernels.EMULATED_MARK,
            "ts": 5, "dur": 3, "pid": 1, "tid": 1}  # fmt: skip
    trace = {
        "traceEvents": [
            _iter(0, 0, 50), mark, _launch(6, 1), _launch(20, 2),
            _kernel("Memcpy DtoD", 30, 5, stream=9, corr=1, cat="gpu_memcpy"),
            _kernel("Memcpy DtoD", 40, 5, stream=7, corr=2, cat="gpu_memcpy"),
        ]
    }  # fmt: skip
    assert list(kernels.kernel_table(trace)["category"]) == ["communication", "memory"]
    trace["traceEvents"].remove(mark)  # the control: without the range both are memory
    assert list(kernels.kernel_table(trace)["category"]) == ["memory", "memory"]


def test_a_stand_in_fill_kernel_is_memory_not_compute():
    """An elementwise copy (a gather's fill at W > 1 is one, not a memcpy) launched inside
    STAND_IN_MARK is memory; the same kernel outside, the model's, stays compute."""
    from artifact.measure import kernels
    from tests.test_kernels import _iter, _kernel, _launch

    copy = "void at::native::elementwise_kernel<128, 4, direct_copy_kernel_cuda>"
    mark = {"ph": "X", "cat": "user_annotation", "name": kernels.STAND_IN_MARK,
            "ts": 5, "dur": 3, "pid": 1, "tid": 1}  # fmt: skip
    trace = {
        "traceEvents": [
            _iter(0, 0, 50), mark, _launch(6, 1), _launch(20, 2),
            _kernel(copy, 30, 5, stream=7, corr=1), _kernel(copy, 40, 5, stream=7, corr=2),
        ]
    }  # fmt: skip
    assert list(kernels.kernel_table(trace)["category"]) == ["memory", "compute"]
    trace["traceEvents"].remove(mark)
    assert list(kernels.kernel_table(trace)["category"]) == ["compute", "compute"]


def test_the_report_puts_emulated_beside_real():
    from artifact.report.emulated import side_by_side

    rows = [
        _row("m_fsdp_fp16_mb8_w4", "fsdp", 0.20, 0.18, 0.22),
        _emulated_row("m_fsdp_fp16_mb8_w4_e4", "fsdp", 0.12, 0.10, 0.14),
        _emulated_row("other_w4_e4", "fsdp", 0.3, 0.2, 0.4),  # no real twin: not paired
    ]
    table = side_by_side(pd.DataFrame(rows))
    assert table == [["m_fsdp_fp16_mb8_w4", "4", "slowdown", "+20.0 % [+18.0, +22.0]",
                      "+12.0 % [+10.0, +14.0]"]]  # fmt: skip


def test_the_preview_says_what_link_the_copies_achieved(tmp_path):
    """Session 14 on one H200 (fig4 quick, rank 0 of 4): 4485 MiB per step paced to 450 GB/s
    took 13.83 ms of the trace's communication time in `sequential`, 340 GB/s: the column
    shows it beside the pace, so nobody reads the preview as at 450."""
    import shutil

    from artifact.report.build import write_report

    run = tmp_path / "run"
    shutil.copytree(ROOT / "results" / "h200x1" / "session14" / "emulated-w4", run)
    summary = pd.read_csv(run / "summary.csv")
    c = "gpt3-1.3b_fsdp_fp16_mb8_w4_e4"
    seq = summary[(summary["config_id"] == c) & (summary["mode"] == "sequential")]
    mib, ms = (float(seq.loc[seq["metric"] == m, "mean"].iloc[0]) for m in (
        "emulated_mib_per_step", "communication_ms"))  # fmt: skip
    achieved = mib * MIB / ms * 1e3 / 1e9
    assert 300 < achieved < 400  # below the pace: the copies' time is not all the link's
    text = (write_report(run) / "appendix.md").read_text()
    assert f"| {c} | 4 |" in text and f"| {mib:.0f} | {achieved:.0f} (of 450) |" in text


def test_paced_at_each_collectives_own_rate_the_link_holds_and_v1_does_too(tmp_path):
    """The same configuration after the pacer's per-collective rate and nocomm's fills
    counted as memory (session 14's second call), summarised again from its records:
    447 of 450 GB/s in `sequential`, and nocomm's compute equal to sequential's (V1's gap
    was -3.7 % [-4.2, -3.2] before)."""
    import shutil

    from artifact.analyze.summarize import write_summary

    run = tmp_path / "run"
    shutil.copytree(ROOT / "results" / "h200x1" / "session14" / "emulated-w4-fixed", run)
    (run / "summary.csv").unlink()
    s = write_summary(run)

    def mean(mode, metric):
        return float(s.loc[(s["mode"] == mode) & (s["metric"] == metric), "mean"].iloc[0])

    link_ms = mean("sequential", "emulated_mib_per_step") * MIB / 450e9 * 1e3
    assert mean("sequential", "communication_ms") == pytest.approx(link_ms, rel=0.02)
    assert mean("derived", "v1_baseline_gap") == pytest.approx(0, abs=0.005)


def test_fig4_and_fig10_at_w4_on_one_commit_pace_every_precision_and_judge_fig10s_claim():
    """Session 15 on one H200 (fig4 and fig10 quick as rank 0 of 4, n = 5, one commit):
    the copies reach the paced 450 GB/s within 5 % in `sequential` at FP16, BF16 and FP32
    (433, 440 and 458 GB/s), V1's gap is within its 1-point margin at each, and fig10's
    claim (FP16 slows compute less than FP32) is judged on the three rows together."""
    run = ROOT / "results" / "h200x1" / "session15" / "emulated-w4"
    s = pd.read_csv(run / "summary.csv")
    s = s[s["figure"] == "fig10"]

    def mean(precision, mode, metric):
        rows = s[(s["precision"] == precision) & (s["mode"] == mode) & (s["metric"] == metric)]
        return float(rows["mean"].iloc[0])

    for p in ("fp16", "bf16", "fp32"):
        mib, ms = (mean(p, "sequential", m) for m in ("emulated_mib_per_step", "communication_ms"))
        assert mib * MIB / (ms / 1e3) / 1e9 == pytest.approx(450, rel=0.05), p
        assert abs(mean(p, "derived", "v1_baseline_gap")) < 0.01, p
    v = compare(run)
    claim = v[(v["item"] == "fp16_relieves_small_models") & (v["item_type"] == "preview")]
    assert len(claim) == 1 and claim["config_id"].iloc[0].count("_e4") == 3
    assert claim["verdict"].iloc[0] in ("reproduced", "not reproduced", "inconclusive")


def test_the_preview_shows_rank_0s_peak_beside_the_estimate_the_fit_check_used():
    """Session 15's rows (quick, rank 0 of 4 on one H200): the preview's memory column puts
    each measured peak beside the estimate its run gated on, 1.01 to 1.03 times it."""
    from artifact.report.emulated import _peak_text
    from artifact.results import Results

    run = Results.load(ROOT / "results" / "h200x1" / "session15" / "emulated-w4")
    cells = {
        c: _peak_text(run.summary, c, run.configs[c]["memory_estimate_gib"])
        for c in run.emulated_configs
    }
    assert cells == {
        "gpt3-1.3b_fsdp_bf16_mb8_w4_e4": "25.0 of 24.8 (x1.01)",
        "gpt3-1.3b_fsdp_fp16_mb8_w4_e4": "25.0 of 24.8 (x1.01)",
        "gpt3-1.3b_fsdp_fp32_mb8_w4_e4": "41.4 of 40.1 (x1.03)",
    }
    assert _peak_text(run.summary, "gpt3-1.3b_fsdp_fp32_mb8_w4_e4", None) == "41.4"
    assert _peak_text(run.summary, "no_such_config", 10.0) == "-"


def test_the_pacer_times_each_collectives_own_copies_once_and_counts_none(monkeypatch):
    """The pad is the link's time less the copies' own, at the rate the collective's own
    kernels reach (session 14: a plain copy's rate let FP16's gathers and reduce-scatters
    take 13.8 ms for 10.45 ms of link time). Timed here on the CPU's copies: once per
    collective, dtype and size, and none of the probe's bytes enter TRAFFIC."""
    from artifact.rank import emulation, modes

    pacer = object.__new__(emulation._Pacer)  # no spin calibration: that needs a GPU
    pacer.device, pacer.rates = torch.device("cpu"), {}
    calls = []
    copies = emulation._copies
    monkeypatch.setattr(emulation, "_copies", lambda *a: calls.append(a[0]) or copies(*a))
    emulation.TRAFFIC.clear()
    emulation.TRAFFIC["all_gather"] = 7  # a run's bytes so far: kept as they are
    gather = {"output_tensor": torch.empty(4 << 20), "input_tensor": torch.ones(1 << 20)}
    rate = pacer.rate("all_gather_into_tensor", gather, 4, modes._GATHERS, modes._SCATTERS)
    assert 1e8 < rate < 1e13  # bytes a second: a CPU's memory copy, not 0 or infinity
    # (W-1)/W of 16 MiB moved 12 MiB once: k = 256 MiB / 12 MiB = 22 repeats, 3 times, +1
    assert len(calls) == 1 + 3 * 22
    assert dict(emulation.TRAFFIC) == {"all_gather": 7}
    again = pacer.rate("all_gather_into_tensor", gather, 4, modes._GATHERS, modes._SCATTERS)
    assert again == rate and len(calls) == 1 + 3 * 22  # cached
    half = {k: v.half() for k, v in gather.items()}  # another dtype: timed again
    pacer.rate("all_gather_into_tensor", half, 4, modes._GATHERS, modes._SCATTERS)
    assert len(pacer.rates) == 2 and torch.equal(gather["output_tensor"], torch.ones(4 << 20))


def test_the_preview_bounds_eq1_by_the_compute_that_ran_beside_communication():
    """One H100, fig4 quick as rank 0 of 4 (results/h100x1/emulated-7b9e71c): 0.122 of
    20.4 ms of the stand-in's communication overlapped 192.5 ms of compute, 1.3 % of it.
    If only those kernels slow, Eq. 1 <= s / (1 - s) however slow they run."""
    from artifact.report.build import _first_line
    from artifact.report.emulated import beside_share, bound_sentence
    from artifact.results import Results

    run = Results.load(ROOT / "results" / "h100x1" / "emulated-7b9e71c" / "nccl-shaped")
    c = "gpt3-1.3b_fsdp_fp16_mb8_w4_e4n"  # fig4's row (the folder holds fig10's rows too)
    assert c in run.emulated_configs
    share = beside_share(run.summary, c)
    assert share == pytest.approx(0.122 * 20.44 / 192.5, rel=0.02)
    assert beside_share(run.summary, "no_such_config") is None
    # the bound: s = 0.2 allows 25 %; the paper's 18.9 % needs s >= 0.189 / 1.189
    text = bound_sentence(0.2, 0.189)
    assert "Only 20.0 % of compute" in text and "at most 25.0 %" in text
    assert "needs at least 15.9 %" in text
    assert "needs" not in bound_sentence(0.2, None)
    # the first screen names the stand-in that ran and carries the bound (the most over rows)
    line = _first_line(run.summary, run.configs, run.verdicts)
    assert "its traffic as one persistent NCCL-shaped kernel a collective" in line
    assert "paced local copies" not in line and "Only 1.3 % of compute time" in line


def test_the_nccl_shaped_stand_in_is_refused_on_an_amd_gpu_before_the_ranks_start(monkeypatch):
    """Its kernel reads %globaltimer through inline PTX: one line naming the GPU and what
    is accepted there (exit 2 through the CLI's ArtifactError), before anything launches."""
    import argparse

    import torch

    from artifact.core.config import get_preset
    from artifact.launch.request import processes

    preset = get_preset("quick")
    args = argparse.Namespace(stand_in="nccl-shaped", link_gbps=100.0)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *_: "AMD Instinct MI250X/MI250")
    with pytest.raises(ArtifactError) as refused:
        processes(args, "cuda", preset, emulated=True)
    line = str(refused.value)
    assert "\n" not in line and "'AMD Instinct MI250X/MI250'" in line
    assert "--stand-in nccl-shaped" in line and "accepted here: --stand-in copy" in line
    assert (
        processes(argparse.Namespace(stand_in="copy", link_gbps=100.0), "cuda", preset, True) == 1
    )
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *_: "NVIDIA H100 80GB HBM3")
    assert processes(args, "cuda", preset, emulated=True) == 1


def test_a_w_gpu_reproduction_says_how_far_eq1_could_go_where_little_compute_overlapped():
    """The same bound on a real 4-GPU run's first screen, over its training rows only (a
    microbenchmark overlaps wholly, by design); none where Eq. 1 could reach the paper's mean."""
    from artifact.report.build import _first_line

    def summary(fraction, comm_ms):
        rows = [
            ("m_fsdp_fp16_mb8_w4", "overlap_fraction", fraction),
            ("m_fsdp_fp16_mb8_w4", "communication_ms", comm_ms),
            ("m_fsdp_fp16_mb8_w4", "compute_ms", 200.0),
            ("mm_allreduce_w4", "overlap_fraction", 1.0),  # Fig. 8's: not a training row
            ("mm_allreduce_w4", "communication_ms", 20.0),
            ("mm_allreduce_w4", "compute_ms", 20.0),
        ]
        df = pd.DataFrame(rows, columns=["config_id", "metric", "mean"])
        return df.assign(mode="overlap", gpu="NVIDIA H100 80GB HBM3")

    configs = {
        "m_fsdp_fp16_mb8_w4": {"world_size": 4, "parallelism": "fsdp"},
        "mm_allreduce_w4": {"world_size": 4, "parallelism": "allreduce"},
    }
    verdicts = pd.DataFrame(
        {"item": ["compute_slowdown_mean"], "expected": [0.189], "item_type": ["number"],
         "verdict": ["not reproduced"], "figure": ["headline"]}
    )  # fmt: skip
    line = _first_line(summary(0.3, 20.0), configs, verdicts)  # 0.3 x 20 / 200: 3 %
    assert line.startswith("**Reproduction on 4 x NVIDIA H100 80GB HBM3**")
    # the microbenchmark's 100 % is left out: the training row's 3 % is the most
    assert (
        "Only 3.0 % of compute time ran beside communication here (the most over the "
        "training rows). If only those kernels slowed" in line
    )
    assert "at most 3.1 %" in line and "needs at least 15.9 %" in line
    assert "beside communication" not in _first_line(summary(1.0, 60.0), configs, verdicts)
