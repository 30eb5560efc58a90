"""Interrupt, resume and bad input: a killed run leaves nothing behind, every bad input
gets one line and exit 2."""

import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import matplotlib.pyplot as plt
import pytest

from artifact import procs
from artifact.errors import ArtifactError
from artifact.report import plots
from artifact.store import RunStore, atomic_write_text
from tests.conftest import ROOT, run_cli


def _processes_naming(text: str) -> list[str]:
    found = []
    for pid in os.listdir("/proc"):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if text in cmd and str(os.getpid()) != pid:
            found.append(cmd)
    return found


def _start_fig8(out: Path, reps: int) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "artifact", "run", "fig8", "--preset", "tiny"]
    return subprocess.Popen(
        [*cmd, "--reps", str(reps), "--out", str(out)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # its own process group, as a job scheduler starts it
    )


def _wait_for_record(out: Path, proc: subprocess.Popen, timeout: float = 240) -> None:
    deadline = time.monotonic() + timeout
    while not list(out.glob("records/**/rep-*.json")) and time.monotonic() < deadline:
        assert proc.poll() is None, "the run ended before it could be interrupted"
        time.sleep(0.2)


def test_kill_9_of_the_group_leaves_no_worker_and_the_rerun_completes(tmp_path):
    out = tmp_path / "run"
    proc = _start_fig8(out, reps=2)
    _wait_for_record(out, proc)
    os.killpg(proc.pid, signal.SIGKILL)  # torchrun's workers live in sessions of their own
    proc.wait()
    deadline = time.monotonic() + 10
    while _processes_naming(str(out)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _processes_naming(str(out)) == []

    before = {p: p.stat().st_mtime_ns for p in out.glob("records/**/rep-*.json")}
    res = run_cli("run", "fig8", "--preset", "tiny", "--reps", "2", "--out", str(out))
    assert res.returncode == 0, res.stderr[-3000:]
    after = sorted(out.glob("records/**/rep-*.json"))
    assert {p: p.stat().st_mtime_ns for p in before} == before  # none redone
    records = [json.loads(p.read_text()) for p in after]  # every record valid
    keys = [(r["config_id"], r["mode"], r["rep"]) for r in records]
    assert len(keys) == len(set(keys)) and {r["rep"] for r in records} == {0, 1}
    assert not list(out.glob("**/.*.tmp"))


def test_a_second_run_into_a_held_folder_is_refused(tmp_path):
    out = tmp_path / "run"
    first = _start_fig8(out, reps=3)
    try:
        deadline = time.monotonic() + 60
        while not (out / ".run.lock").is_file() and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(0.5)
        before = sorted(p.relative_to(out) for p in out.rglob("*") if "records" not in p.parts)
        started = time.monotonic()
        res = run_cli("run", "fig8", "--preset", "tiny", "--reps", "3", "--out", str(out))
        assert time.monotonic() - started < 5
        assert res.returncode == 2
        lines = res.stderr.strip().splitlines()
        assert len(lines) == 1 and f"pid {first.pid}" in lines[0], res.stderr
        after = sorted(p.relative_to(out) for p in out.rglob("*") if "records" not in p.parts)
        assert set(after) - set(before) <= {Path("logs"), Path("logs/fig8.log")}
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        first.wait()


@pytest.mark.parametrize("content", [None, "", "garbage,\x00\x01\nnot,a,summary\n"])
@pytest.mark.parametrize("command", ["compare", "report"])
def test_compare_and_report_refuse_a_bad_summary_in_one_line(tmp_path, command, content):
    if content is not None:
        (tmp_path / "summary.csv").write_text(content)
    res = run_cli(command, str(tmp_path))
    assert res.returncode == 2
    assert len(res.stderr.strip().splitlines()) == 1 and "Traceback" not in res.stderr
    assert "summary" in res.stderr
    assert not (tmp_path / "verdicts.csv").exists() and not (tmp_path / "report").exists()


def test_a_truncated_record_is_named(tmp_path):
    store = RunStore(tmp_path)
    path = store.record_path("fig8", "cfg", "overlap", 0)
    path.parent.mkdir(parents=True)
    path.write_text('{"schema": 1, "figure": "fig8", "met')
    res = run_cli("summarize", str(tmp_path))
    assert res.returncode == 2 and str(path) in res.stderr and "Traceback" not in res.stderr


def test_expected_rows_must_be_a_mapping(tmp_path):
    from artifact.compare import load_expected

    (tmp_path / "x.yaml").write_text(
        "figure: fig4\nclaims:\n  - {id: a, statement: s, kind: every_row_positive, "
        "metric: slowdown, rows: fig4, source: {}, scope: any}\n"
    )
    with pytest.raises(ArtifactError, match=r"x.yaml: claims\[0\]: 'rows' must be a mapping"):
        load_expected(tmp_path)


def test_a_stale_build_lock_is_removed_and_a_live_one_kept(tmp_path, monkeypatch):
    lock = tmp_path / "py311_cpu" / "deepspeed_shm_comm" / "lock"
    lock.parent.mkdir(parents=True)
    lock.touch()
    monkeypatch.setattr(procs, "_building_now", lambda: True)
    assert procs.clear_stale_build_locks(tmp_path) == [] and lock.exists()
    monkeypatch.setattr(procs, "_building_now", lambda: False)
    assert procs.clear_stale_build_locks(tmp_path) == [lock] and not lock.exists()


def test_files_respect_the_umask(tmp_path):
    atomic_write_text(tmp_path / "a.txt", "x")
    mode = stat.S_IMODE((tmp_path / "a.txt").stat().st_mode)
    assert mode == 0o666 & ~procs_umask()


def procs_umask() -> int:
    from artifact.store import UMASK

    return UMASK


def test_a_figure_killed_before_its_rename_leaves_no_file(tmp_path, monkeypatch):
    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1])

    def dies_while_writing(self, fname, **kwargs):
        Path(fname).write_bytes(b"\x89PNG half")
        raise KeyboardInterrupt  # the kill, between the write and the rename

    monkeypatch.setattr(type(fig), "savefig", dies_while_writing)
    with pytest.raises(KeyboardInterrupt):
        plots._save(fig, tmp_path, "fig4")
    assert list(tmp_path.iterdir()) == []
