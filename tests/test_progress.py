"""The run's live progress (artifact/launch/progress.py): rank 0's beacon -> configuration,
repetition and phase k/N, ETA; which lines of the ranks' output reach the console; the
digest a configuration; and a tiny run's console against its log."""

import io
import re
from pathlib import Path

import pandas as pd
import pytest
import torch
from rich.console import Console

from artifact import cli
from artifact.core.errors import ArtifactError
from artifact.launch import progress
from artifact.rank import context, runner
from artifact.rank.runner import RunContext
from artifact.report.runtime import figure_time
from tests.conftest import ROOT, cpu_context, run_cli

H200_SUMMARY = ROOT / "results" / "h200x1" / "all-quick" / "summary.csv"


@pytest.mark.slow  # over 1.5 s on 2 cores (a CLI process, or a long simulation)
def test_a_real_measurement_loop_writes_config_rep_and_phase_k_of_n(tmp_path):
    """Two configurations x 2 repetitions x 2 phases through runner.measure_repetition:
    each step reads the beacon the runner wrote just before it."""
    ctx = cpu_context(tmp_path, "fig8", reps=2)
    beacon = tmp_path / "logs" / "fig8.progress"
    a = torch.ones(8, 8)
    seen = []

    def step_of(phase):
        def step():
            seen.append(progress.read_beacon(beacon))
            a @ a  # a kernel to profile

        return step

    points = [runner.ConfigPoint("cfg-a", {}, None), runner.ConfigPoint("cfg-b", {}, None)]
    for (config_id, config, _), todo in runner.pending(ctx, points, ("overlap", "sequential")):
        assert todo == [0, 1]  # nothing on disk yet
        for rep in todo:
            settings = runner.Settings(config_id, config, step_of, runner.BASE_UNITS)
            runner.measure_repetition(ctx, settings, rep, ("overlap", "sequential"))
    # 8 phases, each stepped once settling, once timed and once profiled
    assert len(seen) == 24
    state = progress.State("fig8", reps=2, started=0.0, figure_of=(4, 9))
    where, done = [], []
    for t, b in enumerate(seen[1::3]):  # the timed step of each phase
        state.update(b, now=float(t))
        where.append(state.where())
        done.append(state.done())
    assert where[0] == ["fig8 (4/9)", "config 1/2 cfg-a", "rep 1/2", "phase 1/2 overlap"]
    assert where[-1] == ["fig8 (4/9)", "config 2/2 cfg-b", "rep 2/2", "phase 2/2 sequential"]
    assert done == [0, 0.5, 1, 1.5, 2, 2.5, 3, 3.5] and state.total() == 4
    assert state.doing(7.0) == "timed iteration 1/1"  # the config id and phase are above it


def test_a_figure_walking_two_lists_numbers_its_configurations_once(tmp_path):
    """fig4 walks its FSDP list, then its pipeline list: the beacon counts 1..4 of 4, not
    1..2 of 2 twice (which sent the done count, and so the ETA, backwards)."""
    ctx = cpu_context(tmp_path, "fig8", reps=1)
    beacon = tmp_path / "logs" / "fig8.progress"
    fsdp = [runner.ConfigPoint(f"fsdp-{k}", {}, None) for k in range(2)]
    pipe = [runner.ConfigPoint(f"pipe-{k}", {}, None) for k in range(2)]
    seen = []
    for points, before in ((fsdp, 0), (pipe, len(fsdp))):
        for _ in runner.pending(ctx, points, ("overlap",), numbered=(before, 4)):
            b = progress.read_beacon(beacon)
            seen.append((b["config_k"], b["config_n"], b["config_id"]))
    assert seen == [(1, 4, "fsdp-0"), (2, 4, "fsdp-1"), (3, 4, "pipe-0"), (4, 4, "pipe-1")]
    # one list alone is numbered within itself, as before
    only = [b for b in runner.pending(ctx, fsdp, ("overlap",))]
    assert len(only) == 2 and progress.read_beacon(beacon)["config_n"] == 2


def _beacon(ctx: RunContext, what: str, **where) -> dict:
    """Written by the rank's own code, read back as the display reads it."""
    ctx.progress(what, **where)
    return progress.read_beacon(ctx.store.root / "logs" / "fig8.progress")


def test_eta_from_the_elapsed_time_and_the_repetitions_done(tmp_path):
    ctx = cpu_context(tmp_path, "fig8", reps=5)
    state = progress.State("fig8", reps=5, started=0.0)
    cfg = {"config_k": 1, "config_n": 2, "config_id": "cfg"}
    state.update(_beacon(ctx, "cfg: set-up", **cfg, rep_k=None, phase=None, phase_k=None), 0.0)
    assert state.done() == 0 and state.total() == 10 and state.eta_s(30.0) is None
    assert state.doing(30.0) == "set-up… 30 s"  # the heartbeat while nothing else moves
    rep = {"rep_n": 5, "phase_k": 1, "phase_n": 3, "phase": "overlap"}
    state.update(_beacon(ctx, "cfg: overlap", rep_k=1, **rep), 40.0)
    assert state.eta_s(40.0) is None  # nothing done yet since the first repetition began
    state.update(_beacon(ctx, "cfg: overlap", rep_k=3, **rep), 60.0)
    # 2 repetitions in 20 s, 8 left: 80 s
    assert state.done() == 2 and state.eta_s(60.0) == pytest.approx(80.0)
    state.update(
        _beacon(ctx, "cfg: sequential", rep_k=3, **rep | {"phase_k": 2, "phase": "sequential"}),
        65.0,
    )
    assert state.done() == pytest.approx(2 + 1 / 3)
    assert state.eta_s(65.0) == pytest.approx(25 * (10 - 7 / 3) / (7 / 3))
    assert state.line(65.0) == (
        "fig8 · config 1/2 cfg · rep 3/5 · phase 2/3 sequential · starting · "
        "0:01:05 elapsed, ETA 0:01:22"
    )


def test_a_resumed_run_measures_its_rate_from_its_own_first_repetition(tmp_path):
    """Configuration 1 was on disk: its repetitions do not count as done fast."""
    ctx = cpu_context(tmp_path, "fig8", reps=4)
    state = progress.State("fig10", reps=4, started=0.0)
    first = {"config_k": 2, "config_n": 3, "config_id": "b", "rep_n": 4, "phase_k": 1, "phase_n": 1}
    state.update(_beacon(ctx, "b: overlap", **first, rep_k=1, phase="overlap"), 50.0)
    state.update(_beacon(ctx, "b: overlap", rep_k=3), 70.0)
    # 2 repetitions in 20 s since the first one seen; 12 - 6 = 6 left
    assert state.done() == 6 and state.eta_s(70.0) == pytest.approx(60.0)


def test_a_plain_text_beacon_and_a_missing_one(tmp_path):
    (tmp_path / "old.progress").write_text("cfg-overlap: timed iteration 1/3\n")
    assert progress.read_beacon(tmp_path / "old.progress") == {
        "what": "cfg-overlap: timed iteration 1/3"
    }
    assert progress.read_beacon(tmp_path / "none.progress") == {}
    state = progress.State("fig8", reps=3, started=0.0)
    state.update({}, 12.0)
    assert state.line(12.0) == (
        "fig8 · starting the ranks (torchrun, imports, process group) · 0:00:12 elapsed, ETA -"
    )


def test_the_same_step_is_written_at_most_every_few_seconds_a_new_one_at_once(
    tmp_path, monkeypatch
):
    monkeypatch.setattr(context, "PROGRESS_EVERY_S", 1e9)  # no clock in the test
    ctx = cpu_context(tmp_path, "fig8", reps=1)
    path = tmp_path / "logs" / "fig8.progress"
    ctx.progress("cfg-overlap: timed iteration 1/50")
    ctx.progress("cfg-overlap: timed iteration 2/50")  # the same step: not rewritten
    assert progress.read_beacon(path)["what"] == "cfg-overlap: timed iteration 1/50"
    ctx.progress("cfg-overlap: profiled iteration 1/50")  # a new step
    assert progress.read_beacon(path)["what"] == "cfg-overlap: profiled iteration 1/50"
    ctx.progress("cfg-overlap: profiled iteration 2/50", rep_k=1)  # new fields
    assert progress.read_beacon(path) == {
        "what": "cfg-overlap: profiled iteration 2/50",
        "rep_k": 1,
    }


@pytest.mark.parametrize(("raw", "expected"), [("", None), ("3/9", (3, 9)), (" 9/9 ", (9, 9))])
def test_figure_of(raw, expected):
    assert progress.figure_of({progress.FIGURE_ENV: raw}) == expected


@pytest.mark.parametrize("raw", ["0/9", "10/9", "three", "3/"])
def test_a_bad_figure_of_is_one_line(raw):
    with pytest.raises(ArtifactError, match=re.escape(f"ARTIFACT_FIGURE_OF={raw!r} is not K/N")):
        progress.figure_of({progress.FIGURE_ENV: raw})


def test_plain_lines_come_at_a_modest_pace():
    due = progress.plain_line_due
    assert due(None, ("a",), 0.0)  # the first at once
    assert not due((0.0, ("a",)), ("b",), 14.0)  # moved on, but too soon
    assert due((0.0, ("a",)), ("b",), 15.0)
    assert not due((0.0, ("a",)), ("a",), 59.0)  # nothing moved: a heartbeat a minute
    assert due((0.0, ("a",)), ("a",), 60.0)


# Lines of real runs' logs (results/h200x1/all-quick/logs, a tiny CPU run's log).
NOISE = [
    "USDT:2026-12-03 08:58:31 20015:20015 SyncActivityProfilerHandler.cpp:52] profiler_start",
    "profiler_stopUSDT:2026-12-03 08:58:32 20014:20014 SyncActivityProfilerHandler.cpp:59] profiler_stop",
    "STAGE:2024-05-01 10:00:00 1234:1234 ActivityProfilerController.cpp:314] Completed Stage: Warm Up",
    "*****************************************",
    "Setting OMP_NUM_THREADS environment variable for each process to be 1 in default, to avoid your system being overloaded",
    "/opt/torch/.venv/lib/python3.12/site-packages/torch/profiler/profiler.py:224: UserWarning: Warning: Profiler clears events at the end of each cycle.",
    "  _warn_once(",
    "[rank 0] INFO megatron.core.distributed.fsdp.src.megatron_fsdp.mixed_precision: Using Megatron-FSDP without Transformer Engine.",
    "/tmp/site/megatron/core/models/backends.py:21: UserWarning: Apex is not installed. Falling back to Torch Norm",
    '  warnings.warn("Apex is not installed. Falling back to Torch Norm")',
    "DeepSpeed deepspeed.ops.comm.deepspeed_shm_comm_op built successfully",
    "[2026-12-03 08:58:31,123] [INFO] [real_accelerator.py:222:get_accelerator] Setting ds_accelerator to cuda",
    "[rank 0] INFO artifact.experiments.training: gpt3-1.3b_fsdp_fp16_mb8_w1 rep 1/5: overlap 292.9 ms, sequential 314.6 ms, MFU 0.314",
    "[rank 0] INFO artifact.experiments.fig8: matmul-256_fp32_allreduce_4MiB_w2 rep 0: overlap 9.245 ms, sequential 8.363 ms",
]
SHOWN = [
    "[rank 0] INFO artifact.experiments.training: gpt3-1.3b_fsdp_fp16_mb8_w1: all 5 repetitions on disk, skipped",
    "[rank 0] WARNING artifact.experiments.training: gpt-tiny_fsdp_fp16_mb2_w2: not run: FP16 is not supported on this CPU",
    "[rank 1] WARNING megatron.core.timers: something a user should read",
    "Traceback (most recent call last):",
    '  File "/work/artifact/rank/worker.py", line 120, in main',
    "ValueError: Type fp16 is not supported on your device.",
    "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:",
    "/work/artifact/measure/power.py:70: UserWarning: the artifact's own warning",
    "NCCL WARN Call to ibv_reg_mr failed",
    "FAILED: shm.o",
]


def test_the_console_shows_errors_and_warnings_not_chatter():
    keep = progress.ConsoleFilter()
    assert [line for line in NOISE if keep(line + "\n")] == []
    assert keep.hidden == len(NOISE)
    keep = progress.ConsoleFilter()
    assert [line for line in SHOWN if keep(line + "\n")] == SHOWN
    assert not keep("\n") and keep.hidden == 0  # a blank line: neither shown nor counted


def test_the_digest_of_a_real_h200_summary():
    df = pd.read_csv(H200_SUMMARY)
    fig4 = df[df["figure"] == "fig4"]
    lines = progress.digest(fig4)
    cid = "gpt3-1.3b_fsdp_fp16_mb8_w1"
    rows = fig4[fig4["config_id"] == cid].set_index(["mode", "metric"])

    def with_ci(row):
        ci = f" [95% CI {row['ci_low']:+.1%}, {row['ci_high']:+.1%}]"
        return f"{row['mean']:+.1%}{ci}" + (" noisy" if row["noisy"] else "")

    i = lines.index(f"{cid} (n = {rows['n'].max()})")
    assert lines[i + 1] == (
        f"  E2E overlap {rows.loc[('overlap', 'e2e_ms'), 'mean']:.4g} ms vs sequential "
        f"{rows.loc[('sequential', 'e2e_ms'), 'mean']:.4g} ms; "
        f"Eq. 1 slowdown {with_ci(rows.loc[('derived', 'slowdown')])}"
    )
    power = rows.loc[("derived", "mean_power_increase")]
    assert lines[i + 2] == f"  mean power, overlap vs sequential {with_ci(power)}"
    assert len(lines) == 3 * fig4["config_id"].nunique()
    fig7 = progress.digest(df[df["figure"] == "fig7"])
    assert all(line.startswith("  power, % of TDP: overlap block ") for line in fig7[1::2])


def test_summarize_fits_80_columns_and_cuts_no_name(monkeypatch):
    df = pd.read_csv(H200_SUMMARY)
    out = io.StringIO()
    monkeypatch.setattr(cli, "console", Console(file=out, width=80, color_system=None))
    cli.print_summary(df, title=str(H200_SUMMARY))
    text = out.getvalue()
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "…" not in text
    words = set(text.split())
    assert set(df["metric"]) <= words and set(df["config_id"]) <= words
    assert set(df["unit"].dropna()) <= words


def _this_run(log: Path) -> tuple[list[str], str]:
    """The ranks' lines of the log's last run, and the line that ends it."""
    lines = (text := log.read_text())[text.rfind("==== run:") :].splitlines()
    return lines[1:-1], lines[-1]


@pytest.mark.slow
def test_a_tiny_run_prints_progress_and_digests_and_logs_everything(tmp_path):
    res = run_cli(
        *("run", "fig8", "--preset", "tiny", "--reps", "2", "--out", str(tmp_path)),
        env={progress.FIGURE_ENV: "4/9"},
    )
    assert res.returncode == 0, res.stdout + res.stderr
    config = "matmul-256_fp32_allreduce_4MiB_w2"
    # the digest, not the table
    out = res.stdout.splitlines()
    i = out.index(f"{config} (n = 2)")
    assert out[i + 1].startswith("  E2E overlap ") and "Eq. 1 slowdown " in out[i + 1]
    assert "noise floor (A/A) " in out[i + 1]
    assert "┃" not in res.stdout and "comm_algbw_GBps" not in res.stdout
    # no terminal: plain progress lines, with the figure's place in `nox -s all`
    assert res.stderr.startswith("fig8 (4/9) · starting the ranks"), res.stderr[:300]
    # the log has every line of the ranks; the console the ones the filter keeps, and says
    # how many it held back
    log, end = _this_run(tmp_path / "logs" / "fig8.log")
    keep = progress.ConsoleFilter()
    shown = [line for line in log if keep(line)]
    # the profiler's own lines, as this torch prints them: 2.13's kineto has USDT probes
    # ("USDT:... profiler_start"); 2.10's (the ROCm image's) has none, and its profiler
    # warns instead (".../torch/profiler/profiler.py:217: UserWarning: ..."): in the log only
    profiler = [line for line in log if "USDT:" in line or "/torch/profiler/" in line]
    assert keep.hidden > 0 and profiler and not set(profiler) & set(shown)
    assert any(f"{config} rep 2/2: overlap" in line for line in log)  # runner.log_repetition
    err = res.stderr.splitlines()
    assert [line for line in err if line in log] == shown
    assert f"{keep.hidden} line(s) of profiler and library output shown only there" in res.stderr
    for noise in ("USDT:", "Warning:", "OMP_NUM_THREADS", f"{config} rep "):
        assert noise not in res.stderr + res.stdout
    # the log's last line: how the ranks ended and the run's wall time, which the report
    # reads beside the records' span (the span leaves out start-up and set-up)
    assert re.fullmatch(r"==== ended: exit 0 after \d+\.\d s", end), end
    took = figure_time(tmp_path, "fig8")
    assert took.wall_s == float(end.split()[-2]) and took.wall_s > took.active_s > 0


@pytest.mark.parametrize("debug", [False, True])
def test_on_a_terminal_the_display_is_live_and_the_ranks_lines_print_above_it(tmp_path, debug):
    ctx = cpu_context(tmp_path, "fig8", reps=3)
    beacon = tmp_path / "logs" / "fig8.progress"
    where = {"config_k": 2, "config_n": 3, "config_id": "cfg-b", "rep_k": 1, "rep_n": 3}
    ctx.progress("cfg-b: setting up deepspeed-zero3", **where)
    out = io.StringIO()
    terminal = Console(file=out, force_terminal=True, width=120, color_system=None)
    state = progress.State("fig10", reps=3, started=0.0, figure_of=(6, 9))
    log = tmp_path / "logs" / "fig10.log"
    with progress.Display(terminal, state, beacon, log, debug) as display:
        for line in (NOISE[0], SHOWN[1]):
            display.echo(line + "\n")
    text = out.getvalue()
    assert "fig10 (6/9) · config 2/3 cfg-b · rep 1/3" in text
    assert "setting up deepspeed-zero3" in text and "ETA" in text
    assert SHOWN[1] in text and (NOISE[0] in text) == debug
    assert f"log: {log} (the ranks' whole output" in text
