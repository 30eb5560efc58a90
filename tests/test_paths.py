"""An output folder no run can write is refused in one line before anything is written:
characters the tools cannot quote, names and paths too long, no free inodes; and a temp
file never outlives a failed write (issue 61 items 4-6)."""

import errno
import tempfile

import pytest

from artifact import store
from artifact.core.errors import ArtifactError
from tests.conftest import run_cli
from tests.factories import record


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "said"),
    [
        ('a"b', "holds '\"'"),
        ("a\\b", "holds '\\\\'"),
        ("x" * 300, "a name of 300 bytes"),
        ("/".join(["y" * 200] * 20), "bytes long and a run writes paths"),
    ],
)
@pytest.mark.parametrize("command", [("run", "fig8"), ("all",)])
def test_a_bad_out_is_one_line_exit_2_and_nothing_written(tmp_path, name, said, command):
    out = tmp_path / name
    res = run_cli(*command, "--out", str(out), timeout=120)
    lines = [x for x in res.stderr.splitlines() if x.strip()]
    assert res.returncode == 2, res.stderr
    assert len(lines) == 1 and lines[0].startswith("error:") and said in lines[0], res.stderr
    assert list(tmp_path.iterdir()) == []


def test_no_free_inodes_is_refused_before_a_run(tmp_path, monkeypatch):
    monkeypatch.setattr(store, "free_inodes", lambda folder: 12)
    with pytest.raises(ArtifactError) as e:
        store.check_path(tmp_path / "run")
    assert "12 free inodes" in str(e.value) and "2000 or more" in str(e.value)


def test_a_failed_write_leaves_no_temp_file_and_says_why(tmp_path, monkeypatch):
    def full(*a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(tempfile, "mkstemp", full)
    monkeypatch.setattr(store, "free_inodes", lambda folder: 0)
    with pytest.raises(store.NoSpace, match="no free inodes"):
        store.atomic_write_text(tmp_path / "status.json", "{}")
    assert list(tmp_path.iterdir()) == []

    def too_long(*a, **k):
        raise OSError(errno.ENAMETOOLONG, "File name too long")

    monkeypatch.setattr(tempfile, "mkstemp", too_long)
    with pytest.raises(ArtifactError, match="shorter --out"):
        store.atomic_write_text(tmp_path / "status.json", "{}")


def test_a_write_that_fails_midway_removes_its_temp_file(tmp_path):
    def breaks(f):
        f.write("half")
        raise OSError(errno.EIO, "I/O error")

    with pytest.raises(OSError):
        store.atomic_write(tmp_path / "summary.csv", breaks)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(("shared", "kept"), [(True, True), (False, False)])
def test_a_shared_folder_keeps_another_nodes_write_in_flight(tmp_path, shared, kept):
    """Two nodes' launchers share one folder: one cleared the other's temporary plan.json
    as it wrote it, and that node failed its rename (FileNotFoundError)."""
    from artifact.core.rankjob import RankJob
    from artifact.launch.stage import _before_launch

    in_flight = tmp_path / ".plan.json.u7paxg89.tmp"
    in_flight.write_text("{")
    said = []
    _before_launch(RankJob("fig8", "tiny", "cpu", tmp_path, 1), said.append, shared=shared)
    assert in_flight.exists() == kept
    assert bool(said) != kept  # the clearing is said where it happens


@pytest.mark.slow
def test_a_closed_stdout_does_not_end_the_run(tmp_path):
    """`run ... | head -1`: every record is written, exit 0, and one line on stderr says
    that output stopped (it exited 1 silently; `all | head -3` stopped the suite)."""
    import subprocess
    import sys

    from tests.conftest import ROOT

    out = tmp_path / "run"
    cmd = f"{sys.executable} -m artifact run fig8 --preset tiny --reps 2 --out {out} | head -1 > /dev/null; exit ${{PIPESTATUS[0]}}"
    res = subprocess.run(["bash", "-c", cmd], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    assert len(list(out.glob("records/fig8/*/*/rep-*.json"))) == 2 * len(
        list(out.glob("records/fig8/*/*/rep-000.json"))
    )
    assert res.stderr.count("note: stdout was closed by its reader") == 1
    assert (out / "summary.csv").is_file()


@pytest.mark.slow
def test_a_hung_run_keeps_its_ranks_tracebacks_off_the_console(tmp_path, monkeypatch):
    """The watchdog stops a hung run; the tracebacks its ranks print on the way out go to
    the log, not to the console (about 80 lines reached it)."""
    import sys

    from artifact.launch import torchrun

    script = (
        "import signal, sys, time\n"
        "def bye(*a):\n"
        "    print('\\n'.join(f'Traceback line {k}' for k in range(80)), flush=True)\n"
        "    sys.exit(1)\n"
        "signal.signal(signal.SIGTERM, bye)\n"
        "print('rank 0 started', flush=True)\n"
        "time.sleep(60)\n"
    )
    from artifact.core.config import get_preset
    from artifact.core.options import RunOptions
    from artifact.core.rankjob import RankJob
    from artifact.launch.request import RunRequest

    monkeypatch.setattr(torchrun, "torchrun_command", lambda *a: [sys.executable, "-c", script])
    shown: list[str] = []
    log = tmp_path / "logs" / "fig8.log"
    job = RankJob("fig8", "tiny", "cpu", tmp_path, 1)
    r = RunRequest("fig8", get_preset("tiny"), "cpu", 1, RunOptions(), tmp_path, 1)
    outcome = torchrun.launch(log, job, r, hang_s=2.0, echo=shown.append)
    assert outcome.hung and "no progress for 2 s" in outcome.hung
    assert shown == ["rank 0 started\n"]
    assert "Traceback line 79" in log.read_text()


def test_phase_times_reads_a_folders_time_from_its_logs_and_records(tmp_path):
    """benchmarks/phase_times.py: wall from the log, settling once a repetition of rounds,
    timed and profiled from each record, the rest what is left; copies cost nothing."""
    import json
    import subprocess
    import sys

    from tests.conftest import ROOT

    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "fig4.log").write_text(
        "==== ended: exit 0 after 60.0 s\n==== ended: exit 0 after 40.0 s\n"
    )
    base = {"figure": "fig4", "config_id": "c", "rep": 0, "timed": "interleaved rounds"}
    m = {"settle_s": 5.0, "timed_iters": 10, "e2e_ms": 1000.0, "profiled_iters": 2}
    for mode in ("overlap", "sequential"):
        d = tmp_path / "records" / "fig4" / "c" / mode
        d.mkdir(parents=True)
        (d / "rep-000.json").write_text(json.dumps(record(**base, mode=mode, metrics=m)))
    d = tmp_path / "records" / "fig4" / "copied" / "overlap"
    d.mkdir(parents=True)
    (d / "rep-000.json").write_text(
        json.dumps(record(**base, mode="overlap", metrics=m, reused_from="fig6"))
    )
    res = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "phase_times.py"), str(tmp_path), "--json"],
                         capture_output=True, text=True, check=True)  # fmt: skip
    row = json.loads(res.stdout)["fig4"]
    assert row == {
        "wall": 100.0,
        "records": 2.0,
        "settling": 5.0,
        "timed": 20.0,
        "profiled": 4.0,
        "rest": 71.0,
    }


def test_an_interruption_after_the_figure_finished_says_it_finished(tmp_path):
    """A Ctrl-C that reached the CLI after rank 0 had written the last record and the
    'ran' status: it said 'not finished' with every record on disk."""
    from artifact.core.rankjob import RankJob
    from artifact.launch.stage import launch_and_record
    from artifact.store import RunStore

    store = RunStore(tmp_path)
    store.write_status(
        "fig8", "ran", "every configuration ran", finished={"reps": 2, "processes": 2, "records": 0}
    )

    def start(log_path):
        raise KeyboardInterrupt

    said: list[str] = []
    job = RankJob("fig8", "tiny", "cpu", tmp_path, 2)
    rc = launch_and_record(job, start, said.append, lambda m, **k: said.append(m))
    assert rc == 130
    assert store.status()["fig8"]["status"] == "ran"  # not overwritten with 'failed'
    assert any("after it finished" in line for line in said) and not any(
        "not finished" in line for line in said
    )
