"""Interrupt, resume and bad input: a killed run leaves nothing behind, every bad input
gets one line and exit 2."""

import json
import os
import shlex
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import matplotlib.pyplot as plt
import pytest

from artifact import procs
from artifact.core.errors import ArtifactError
from artifact.report import plots
from artifact.store import RunStore, atomic_write_text
from tests.conftest import ROOT, processes_naming, run_cli


def _start_fig8(out: Path, reps: int) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "artifact", "run", "fig8", "--preset", "tiny"]
    return subprocess.Popen(
        [*cmd, "--reps", str(reps), "--out", str(out)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # its own process group, as a job scheduler starts it
    )


def _wait_for_record(
    out: Path, proc: subprocess.Popen, timeout: float = 240, name: str = "rep-*.json"
) -> None:
    deadline = time.monotonic() + timeout
    while not list(out.glob(f"records/**/{name}")):
        assert proc.poll() is None, "the run ended before it could be interrupted"
        assert time.monotonic() < deadline, f"no record after {timeout:.0f} s"
        time.sleep(0.2)


@pytest.mark.slow
def test_kill_9_of_the_group_leaves_no_worker_and_the_rerun_completes(tmp_path):
    """A kill -9 keeps every finished repetition: the rerun redoes none of them (a
    repetition cut between its modes' records is redone whole, so its modes stay paired)."""
    out = tmp_path / "run"
    proc = _start_fig8(out, reps=3)
    # repetition 0 finished (the sweep's one configuration has begun repetition 1); the
    # kill may land anywhere in repetition 1, between its modes' records too (on 2 busy
    # cores it did: a test that counted a half-written repetition as finished failed)
    _wait_for_record(out, proc, name="rep-001.json")
    os.killpg(proc.pid, signal.SIGKILL)  # torchrun's workers live in sessions of their own
    proc.wait()
    deadline = time.monotonic() + 10
    while processes_naming(str(out)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert processes_naming(str(out)) == []

    before = {p: p.stat().st_mtime_ns for p in out.glob("records/**/rep-*.json")}
    res = run_cli("run", "fig8", "--preset", "tiny", "--reps", "3", "--out", str(out))
    assert res.returncode == 0, res.stderr[-3000:]
    after = sorted(out.glob("records/**/rep-*.json"))
    records = [json.loads(p.read_text()) for p in after]  # every record valid
    keys = [(r["config_id"], r["mode"], r["rep"]) for r in records]
    assert len(keys) == len(set(keys)) and {r["rep"] for r in records} == {0, 1, 2}
    modes = {r["mode"] for r in records}

    def finished(p: Path) -> bool:  # every mode of its repetition was on disk before
        rep = p.name
        return {
            q.parent.name for q in before if q.name == rep and q.parent.parent == p.parent.parent
        } == modes

    kept = {p: t for p, t in before.items() if finished(p)}
    assert any(p.name == "rep-000.json" for p in kept)  # repetition 0 was finished
    assert {p: p.stat().st_mtime_ns for p in kept} == kept  # none of them redone
    assert not list(out.glob("**/.*.tmp"))


@pytest.mark.slow
def test_a_second_run_into_a_held_folder_is_refused(tmp_path):
    out = tmp_path / "run"
    first = _start_fig8(out, reps=25)  # long enough to be running still when refused
    try:
        # the first run well under way (its first record written: its status and progress
        # beacon are there), so what appears below is the second run's alone; on 2 busy
        # cores a fixed half second after the lock caught the first run's status mid-start
        deadline = time.monotonic() + 180
        while not list(out.glob("records/fig8/*/*/rep-*.json")) and time.monotonic() < deadline:
            time.sleep(0.1)
        # what the first run goes on writing aside: records, traces, and its progress
        # beacon's atomic-write temporaries (logs/.fig8.progress.*.tmp: on 2 busy cores one
        # was caught between its write and its rename)
        own = {"records", "traces"}

        def mine(p: Path) -> bool:
            return bool(own & set(p.parts)) or p.name.startswith(".fig8.progress.")

        before = sorted(p.relative_to(out) for p in out.rglob("*") if not mine(p))
        res = run_cli("run", "fig8", "--preset", "tiny", "--reps", "25", "--out", str(out))
        # refused at once, not after waiting for the first run to end (a bound in seconds
        # failed inside check-image.sh's niced build on 2 busy cores: 28 s)
        assert first.poll() is None, "the first run ended before the second was refused"
        assert res.returncode == 2
        lines = res.stderr.strip().splitlines()
        assert len(lines) == 1 and f"pid {first.pid}" in lines[0], res.stderr
        after = sorted(p.relative_to(out) for p in out.rglob("*") if not mine(p))
        assert set(after) - set(before) <= {Path("logs"), Path("logs/fig8.log")}
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        first.wait()
    # killed this early, the ranks may still be importing torch: none may outlive it (they
    # used to, orphaned before asking to die with torchrun, waiting for a rendezvous)
    deadline = time.monotonic() + 10
    while processes_naming(str(out)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert processes_naming(str(out)) == []


# `all` with fig8 alone (the quickest figure), as cli.main runs it: its signal handlers
_ALL_FIG8 = (
    "import signal, sys; from artifact import cli, suite; "
    "signal.signal(signal.SIGTERM, cli._on_sigterm); signal.signal(signal.SIGINT, cli._on_sigint); "
    "suite.REGISTRY = {'fig8': suite.REGISTRY['fig8']}; "
    "sys.exit(suite.run_all(sys.argv[1:]))"
)


@pytest.mark.slow
@pytest.mark.parametrize("to", ["all alone", "the process group"])
def test_a_sigterm_to_all_lets_the_figure_record_its_interruption(tmp_path, to):
    """`timeout` signals the whole group, `kill` the one process: either way the figure
    running under `all` says it was interrupted and what it kept, and `all` says how to
    resume (it used to kill the figure outright and print "internal error: Terminated")."""
    out = tmp_path / "run"
    cmd = [sys.executable, "-c", _ALL_FIG8, "--preset", "tiny", "--reps", "5", "--out", str(out)]
    proc = subprocess.Popen(
        cmd, cwd=ROOT, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    _wait_for_record(out, proc)
    if to == "all alone":
        proc.send_signal(signal.SIGTERM)
    else:
        os.killpg(proc.pid, signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err[-2000:]
    status = json.loads((out / "status" / "fig8.json").read_text())
    assert status["status"] == "failed" and "interrupted by SIGTERM" in status["reason"]
    assert "all: interrupted by SIGTERM during run fig8" in err and "resume: " in err
    assert "internal error" not in err
    assert list(out.glob("records/**/rep-*.json"))  # what finished is kept
    assert processes_naming(str(out)) == []


# a nox session's call of the CLI (noxfile._artifact), fig8 alone
_NOX_FIG8 = (
    "import sys; sys.path.insert(0, '.'); import noxfile; "
    "sys.exit(noxfile._artifact(sys.executable, 'run', 'fig8', *sys.argv[1:]))"
)


@pytest.mark.slow
@pytest.mark.parametrize(
    "signum, to", [(signal.SIGTERM, "nox alone"), (signal.SIGINT, "the process group")]
)
def test_nox_waits_for_an_interrupted_figure_to_record_it(tmp_path, signum, to):
    """A SIGTERM that reaches nox alone (`docker stop` through `--init`) is passed on; a
    Ctrl-C (the terminal signals the group) is the figure's to handle, and nox waits (its
    own session.run SIGKILLed the figure half a second later). Either way the figure's
    status says it was interrupted."""
    out = tmp_path / "run"
    cmd = [sys.executable, "-c", _NOX_FIG8, "--preset", "tiny", "--reps", "5", "--out", str(out)]
    proc = subprocess.Popen(
        cmd, cwd=ROOT, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    _wait_for_record(out, proc)
    if to == "nox alone":
        proc.send_signal(signum)
    else:
        os.killpg(proc.pid, signum)
    _, err = proc.communicate(timeout=180)
    assert proc.returncode == 130, err[-2000:]
    status = json.loads((out / "status" / "fig8.json").read_text())
    assert status["status"] == "failed" and "interrupted" in json.dumps(status), status
    assert processes_naming(str(out)) == []


def test_a_nox_session_ends_as_the_cli_did():
    """Bad input exits 2 through nox too; an interruption is nox's own (it runs no further
    session); any other failure fails the session."""
    sys.path.insert(0, str(ROOT))
    import noxfile

    class Session:
        def error(self, why):
            raise RuntimeError(why)

    noxfile._ended(Session(), 0)
    with pytest.raises(SystemExit) as e:
        noxfile._ended(Session(), 2)
    assert e.value.code == 2
    with pytest.raises(KeyboardInterrupt):
        noxfile._ended(Session(), 130)
    with pytest.raises(RuntimeError, match="exit 1"):
        noxfile._ended(Session(), 1)


_CHILD = (
    "import os, sys; from artifact import procs; "
    "parent = sys.argv[1]; parent = int(parent) if parent.isdigit() else parent; "
    "procs.die_with_parent(parent=parent); print('alive', flush=True)"
)


@pytest.mark.parametrize(
    "parent, survives",
    [
        ("self", True),  # its real parent (this test's process), alive
        ("other", False),  # another PID: its parent is gone, as after a kill before the prctl
        ("python", True),  # the parent's command line holds it
        (procs.TORCHRUN, False),  # a rank whose torchrun is gone
    ],
)
def test_a_process_orphaned_before_its_prctl_dies_at_once(parent, survives):
    arg = {"self": str(os.getpid()), "other": str(os.getpid() + 1_000_000)}.get(parent, parent)
    res = subprocess.run(
        [sys.executable, "-c", _CHILD, arg], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    if survives:
        assert res.returncode == 0 and res.stdout == "alive\n", res.stderr
    else:
        assert res.returncode == -signal.SIGKILL and res.stdout == ""


@pytest.mark.slow  # over 1.5 s on 2 cores (a CLI process, or a long simulation)
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


@pytest.mark.slow  # over 1.5 s on 2 cores (a CLI process, or a long simulation)
def test_a_truncated_record_is_named(tmp_path):
    store = RunStore(tmp_path)
    path = store.record_path("fig8", "cfg", "overlap", 0)
    path.parent.mkdir(parents=True)
    path.write_text('{"schema": 1, "figure": "fig8", "met')
    res = run_cli("summarize", str(tmp_path))
    assert res.returncode == 2 and str(path) in res.stderr and "Traceback" not in res.stderr


def test_expected_rows_must_be_a_mapping(tmp_path):
    from artifact.judge.compare import load_expected

    (tmp_path / "x.yaml").write_text(
        "figure: fig4\nclaims:\n  - {id: a, statement: s, kind: every_row_positive, "
        "metric: slowdown, rows: fig4, source: {}, scope: any}\n"
    )
    with pytest.raises(ArtifactError, match=r"x.yaml: claims\[0\]: 'rows' must be a mapping"):
        load_expected(tmp_path)


@pytest.mark.parametrize("layout", ["py311_cpu/deepspeed_shm_comm", "deepspeed_shm_comm"])
def test_a_stale_build_lock_is_removed_and_a_live_one_kept(tmp_path, layout):
    """Both of torch's layouts: ~/.cache/torch_extensions/pyXY_cpu/<op>/ by default,
    $TORCH_EXTENSIONS_DIR/<op>/ (no Python level) where that is set."""
    lock = tmp_path / layout / "lock"
    lock.parent.mkdir(parents=True)
    lock.touch()
    builder = subprocess.Popen(["sleep", "30"], cwd=lock.parent)  # ninja runs in the build dir
    try:
        assert procs.clear_stale_build_locks(tmp_path) == [] and lock.exists()
    finally:
        builder.kill()
        builder.wait()
    # a lock left by a killed build: stale once old (a young one is waited for)
    os.utime(lock, (time.time() - 120, time.time() - 120))
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


def test_the_watchdog_stops_a_run_that_shows_no_progress(tmp_path):
    from artifact.launch import torchrun

    proc = subprocess.Popen(["sleep", "60"], stdout=subprocess.PIPE)
    progress = tmp_path / "fig8.progress"
    progress.write_text("cfg-overlap: timed iteration 1/3")
    hung: list[str] = []
    started = time.monotonic()
    torchrun._watchdog(proc, progress, [time.time()], 1.0, hung)
    assert time.monotonic() - started < 10 and proc.poll() is not None
    assert hung == ["hung in cfg-overlap: timed iteration 1/3: no progress for 1 s"]


@pytest.mark.slow
def test_resume_with_out_alone_keeps_the_plans_repetitions(tmp_path):
    out = tmp_path / "run"
    proc = _start_fig8(out, reps=2)
    _wait_for_record(out, proc)
    os.killpg(proc.pid, signal.SIGTERM)
    proc.wait()
    res = run_cli("run", "fig8", "--out", str(out))  # no --preset, no --reps
    assert res.returncode == 0, res.stderr[-3000:]
    assert "resuming fig8: its plan asks for 2 repetitions" in res.stdout
    reps = {json.loads(p.read_text())["rep"] for p in out.glob("records/fig8/**/rep-*.json")}
    assert reps == {0, 1}  # the preset's default would have been 3
    fewer = run_cli("run", "fig8", "--reps", "1", "--out", str(out))
    assert fewer.returncode == 2 and "plans 2 repetitions of fig8" in fewer.stderr
    other = run_cli("run", "fig8", "--comm-mib", "1", "--out", str(out))
    assert other.returncode == 2 and "--comm-mib" in other.stderr
    assert len(other.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "args",
    [
        ("fig4", "--models="),
        ("fig8", "--gpus", "99"),
        ("fig4", "--precision", "fp16"),
        ("fig8", "--nproc", str((os.cpu_count() or 1) + 1)),
        ("fig8", "--rdzv-endpoint", "garbage"),
        ("fig8", "--reps", "abc"),
    ],
)
@pytest.mark.slow
def test_bad_options_are_one_line_and_exit_2_before_anything_is_written(tmp_path, args):
    out = tmp_path / "run"
    res = run_cli("run", *args, "--preset", "tiny", "--out", str(out))
    assert res.returncode == 2, res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and res.stderr.startswith("error: ")
    assert not out.exists()


@pytest.mark.slow
def test_a_stale_deepspeed_build_lock_no_longer_hangs_fig4(tmp_path):
    """A killed build left `deepspeed_shm_comm/lock`: torch's loader then waited forever.
    With TORCH_EXTENSIONS_DIR set, torch builds in $TORCH_EXTENSIONS_DIR/<op>/ (no pyXY_cpu
    level): the lock is planted exactly where torch looks."""
    built = sorted(procs.extensions_dir().glob("*/deepspeed_shm_comm/deepspeed_shm_comm.so"))
    ext = tmp_path / "ext"
    op = ext / "deepspeed_shm_comm"
    if built:  # reuse the op built earlier in this session: the test stays fast
        import shutil

        shutil.copytree(built[0].parent, op)
    op.mkdir(parents=True, exist_ok=True)
    (op / "lock").touch()
    res = run_cli(
        *("run", "fig4", "--preset", "tiny", "--models", "gpt-tiny", "--parallelisms", "fsdp"),
        *("--reps", "1", "--hang-timeout-s", "240", "--out", str(tmp_path / "run")),
        timeout=600,
        env={"TORCH_EXTENSIONS_DIR": str(ext)},
    )
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    assert "removed a build lock a killed run left behind" in res.stdout
    assert not (op / "lock").exists()
    assert list((tmp_path / "run").glob("records/fig4/*/overlap/rep-000.json"))


class _FakeGpu:
    def __init__(self, pids):
        self.pids = pids

    def compute_pids(self):
        return self.pids


def test_a_gpu_another_job_uses_is_refused_unless_allowed():
    other = subprocess.Popen(["sleep", "30"])  # stands in for another user's training job
    while b"sleep" not in Path(f"/proc/{other.pid}/cmdline").read_bytes():
        time.sleep(0.01)  # until it has exec'd
    try:
        gpus = {0: _FakeGpu([os.getpid()]), 1: _FakeGpu([other.pid])}
        found = procs.other_gpu_processes(gpus, ours={os.getpid()})
        assert found == [f"GPU 1: pid {other.pid} (sleep 30)"]
        with pytest.raises(
            ArtifactError, match=r"GPU 1: pid \d+ \(sleep 30\).*--allow-shared-device"
        ):
            procs.refuse_shared(found, allow=False)
        procs.refuse_shared(found, allow=True)  # goes on; the records name them
        # our own ranks, seen by the driver under pids this /proc does not show (a
        # container), are not taken for another job while they run
        hidden = {0: _FakeGpu([4_000_000])}
        assert procs.other_gpu_processes(hidden, set(), visible_only=True) == []
        assert procs.other_gpu_processes(hidden, set()) != []
    finally:
        other.kill()
        other.wait()


def test_a_full_disk_leaves_no_half_file_and_says_so(tmp_path):
    import errno

    from artifact.store import atomic_write

    def fills_the_disk(f):
        f.write("x" * 1000)
        f.flush()
        raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(ArtifactError, match=r"no space left writing .*after 1000 bytes"):
        atomic_write(tmp_path / "rep-000.json", fills_the_disk)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_ctrl_c_stops_between_repetitions_and_says_how_to_resume(tmp_path):
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "artifact", "run", "fig8", "--preset", "tiny", "--reps", "6"]
    proc = subprocess.Popen(
        [*cmd, "--out", str(out)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    _wait_for_record(out, proc)
    proc.send_signal(signal.SIGINT)  # what a terminal's Ctrl-C sends the CLI
    _, err = proc.communicate(timeout=240)
    assert proc.returncode == 130, err[-2000:]
    lines = [ln for ln in err.splitlines() if ln.startswith(("fig8:", "not finished:", "resume:"))]
    resume = lines[-1].removeprefix("resume: ")
    assert resume.endswith(f" run fig8 --out {out}"), err[-2000:]
    # pasted in the same shell, the command's interpreter has the artifact's packages
    cli = shlex.split(resume.removesuffix(f" run fig8 --out {out}"))
    assert subprocess.run([*cli, "--help"], cwd=ROOT, capture_output=True).returncode == 0
    assert "interrupted by Ctrl-C (between repetitions)" in lines[-3]
    status = json.loads((out / "status" / "fig8.json").read_text())
    assert status["status"] == "failed" and "between repetitions" in status["reason"]
    # whole repetitions only: every repetition on disk has all its phases
    records = [json.loads(p.read_text()) for p in out.glob("records/fig8/**/rep-*.json")]
    phases = {}
    for r in records:
        phases.setdefault((r["config_id"], r["rep"]), set()).add(r["mode"])
    assert len({frozenset(v) for v in phases.values()}) == 1
    assert len({rep for _, rep in phases}) < 6  # it stopped before the end
    assert "Traceback" not in err
