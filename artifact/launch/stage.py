"""`run FIG` as a stage, below the CLI (docs/design.md section 2, item 1): the folder
claimed (one writer: its lock; plan.json reconciled and recorded; room for the plan's
disk estimate), the ranks started, and how they ended written to status/.

The CLI builds one `RunRequest` from the flags (artifact.launch.request: every input checked
before anything is written), calls `claim`, then `launch_and_record`, and prints what
they return; this module prints nothing: the lines it has for the user go through the
`say` and `warn`
callables the CLI hands it (its consoles' print).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from artifact import procs
from artifact.core.errors import ArtifactError, Terminated, interrupted_by
from artifact.core.options import RunOptions
from artifact.core.rankjob import RankJob
from artifact.estimate import reference
from artifact.figures import spec_of
from artifact.launch import runplan
from artifact.launch.request import RunRequest

# Where a first Ctrl-C asks the ranks to stop (set while a run's ranks run; the CLI's
# SIGINT handler touches it). A list, so every module that imports it sees one object.
STOP_FILE: list[Path] = []

Say = Callable[..., None]  # a console's print: the line, then rich's keyword arguments


@dataclass(frozen=True)
class Claim:
    """The folder a run writes, as `claim` left it: its repetitions and the plan's note."""

    out: Path
    reps: int
    note: str | None
    lock: Any  # held until the process exits (None for a shared folder)


def disk_need(figure: str, preset, nproc: int, options: RunOptions, out: Path) -> int | None:
    """What `figure` still writes into `out`, by the plan's disk estimate (None: unknown)."""
    from artifact.budget import disk_left
    from artifact.plan import PlanQuery

    world = options.emulate_world or None
    gpus = nproc if world is None and preset.device != "cpu" else None
    return disk_left(
        PlanQuery((figure,), preset.name, gpus=gpus, emulate_world=world), out, {figure}
    )


def claim(r: RunRequest) -> Claim:
    """The folder's plan reconciled with this run, room for what it writes, the folder
    writable and locked, and this run recorded in plan.json."""
    from artifact import env as envmod
    from artifact.store import check_path, check_space, default_out_dir, ensure_writable

    out = r.out if r.out else default_out_dir(r.preset.name)
    fingerprint = envmod.fingerprint(envmod.capture())
    plan = dict(figure=r.figure, preset=r.preset.name, device=r.device, fingerprint=fingerprint)
    reps, note = runplan.reconcile(
        out,
        **plan,
        reps=r.reps,
        default_reps=spec_of(r.figure).default_reps(r.preset),
        options=r.options,
    )
    # before anything is written: a full disk is one line here, not tracebacks mid-run
    check_path(out)
    check_space(out, disk_need(r.figure, r.preset, r.nproc, r.options, out), r.figure)
    out = ensure_writable(out)
    lock = None if r.shared else procs.FolderLock(out).acquire()
    runplan.record(out, **plan, reps=reps, options=r.options, nproc=r.nproc)
    return Claim(out, reps, note, lock)


def finished_already(r: RunRequest, c: Claim) -> str | None:
    """What this plan already finished (no ranks to start), or None: the ranks would
    find every repetition on disk and skip it; starting them costs 15-19 s a figure on
    a GPU (torchrun, imports, process group) in a resumed suite."""
    from artifact.store import RunStore

    store = RunStore(c.out)
    if r.nnodes != 1 or not store.finished(r.figure, c.reps, r.nproc):
        return None
    if store.status()[r.figure]["status"] == "not run":  # this machine cannot run it
        done = "recorded 'not run' by this plan's ranks on this machine"
    else:
        done = f"all {c.reps} repetitions of every configuration are on disk"
    return f"{r.figure}: {done} (status/{r.figure}.json); nothing to run"


def writer_lock(out: Path):
    """One writer a folder: a stage that writes into `out` takes its lock. A folder a
    run has written (its lock file, or records) is locked; any other is left to the
    stage to refuse, with no lock file left behind."""
    ran = (out / ".run.lock").is_file() or (out / "records").is_dir()
    return procs.FolderLock(out).acquire() if ran else None


def _before_launch(job: RankJob, say: Say, shared: bool = False) -> None:
    """Leftovers of a killed run cleared, and DeepSpeed's first-use build announced. A
    folder the nodes of a multi-node run share (`shared`) keeps its temporary files: one
    may be another node's write in flight (clearing it failed that node's rename; readers
    ignore temporary files anyway)."""
    from artifact.store import RunStore

    if not shared and (removed := RunStore(job.out).clean_partial()):
        say(f"removed {removed} half-written file(s) a killed run left in {job.out}")
    for stale in procs.clear_stale_build_locks(say=say):
        say(f"removed a build lock a killed run left behind: {stale}")
    # a figure whose FSDP rows may go through DeepSpeed (its spec takes --fsdp-impl)
    takes_impl = "fsdp_impl" in spec_of(job.figure).options
    uses_deepspeed = takes_impl and "deepspeed" in job.options.fsdp_impls
    if job.device == "cpu" and uses_deepspeed and not procs.built("deepspeed_shm_comm"):
        say(
            "first use: DeepSpeed builds its CPU communication op now (about "
            f"{reference.value('deepspeed_cpu_op_build_s'):.0f} s on 2 cores; needs a C++ "
            f"compiler and ninja), once, into {procs.extensions_dir()}"
        )


def interrupted(store, figure: str, why: str, reps: int, out: Path, warn: Say) -> int:
    """Three lines: what finished, what did not, and the command that resumes."""
    from artifact.command import invocation

    done = store.record_count(figure)
    warn(
        f"{figure}: interrupted by {why}; {done} record(s) finished and kept\n"
        f"not finished: the rest of {figure}'s {reps} repetitions (status/{figure}.json)\n"
        f"resume: {invocation()} run {figure} --out {out}",
        markup=False,
        highlight=False,
    )
    return 130


def _stopped(store, figure: str, why: str, reps: int, out: Path, warn: Say) -> int:
    """The ranks interrupted: the status says so, unless rank 0 had finished the figure
    (every repetition, its 'ran' status) before the interruption reached the CLI."""
    ended = store.status().get(figure, {})
    if ended.get("status") == "ran" and ended.get("finished"):
        warn(
            f"{figure}: interrupted by {why} after it finished: every repetition and its "
            f"status are written ({store.record_count(figure)} records)",
            markup=False,
            highlight=False,
        )
        return 130
    store.write_status(figure, "failed", f"interrupted by {why} (log: logs/{figure}.log)")
    return interrupted(store, figure, why, reps, out, warn)


def launch_and_record(
    job: RankJob, start: Callable[[Path], Any], say: Say, warn: Say, shared: bool = False
) -> int | None:
    """Start the ranks (`start(log_path)`: the CLI's launch under its live display) and
    record how they ended in status/. Returns the exit code of a run that did not end
    well (1 failed, 130 interrupted), None where the figure ended (its outcome is the
    CLI's to print); raises ArtifactError where a rank said why in one line (exit 2)."""
    from artifact.launch import torchrun
    from artifact.store import RunStore

    figure, out, reps = job.figure, job.out, job.reps
    log_path = out / "logs" / f"{figure}.log"
    store = RunStore(out)
    stop = out / "logs" / f"{figure}.stop"
    stop.unlink(missing_ok=True)
    STOP_FILE[:] = [stop]
    _before_launch(job, say, shared)
    try:
        outcome = start(log_path)
    except (KeyboardInterrupt, Terminated) as e:
        return _stopped(store, figure, interrupted_by(e), reps, out, warn)
    # The ranks are done: a Ctrl-C from here on stops the CLI at once (exit 130; every
    # record and the status are written already), with no "after the repetition" to wait for
    STOP_FILE[:] = []
    rc = outcome.returncode
    status = store.status().get(figure, {})
    if stop.exists():  # a first Ctrl-C: the ranks stopped between repetitions, if not done
        stop.unlink(missing_ok=True)
        if status.get("interrupted"):
            return interrupted(store, figure, "Ctrl-C (between repetitions)", reps, out, warn)
        if rc == 0:
            warn(f"{figure}: the Ctrl-C came after the last repetition: {figure} finished")
    if outcome.hung:
        store.write_status(figure, "failed", f"{outcome.hung} (log: logs/{figure}.log)")
        status = store.status()[figure]
    if outcome.error:  # a rank's own one line (a full disk): the run's error, exit 2
        store.write_status(figure, "failed", f"{outcome.error} (log: logs/{figure}.log)")
        raise ArtifactError(f"{figure}: {outcome.error}")
    if rc != 0 or status.get("status") in (None, "running"):
        if status.get("status") != "failed":  # the rank that failed did not say why itself
            error = torchrun.last_error(log_path) or "no error message; see the log"
            store.write_status(
                figure,
                "failed",
                f"the ranks exited with code {rc}: {error} (log: logs/{figure}.log)",
            )
        warn(f"{figure}: failed: {store.status()[figure]['reason']}")
        return 1
    return None


def summarize_if_stale(out: Path, say: Say) -> None:
    """`compare` judges the records as they are now: a summary older than them is
    written again first (and said)."""
    from artifact.store import damaged_derived, stale_summary

    summary_files = ("summary.csv", "configs.json", "provenance.json")
    if stale := stale_summary(out):
        why = f"{out / 'summary.csv'} is older than {stale} record(s)"
    elif damaged := damaged_derived(out, summary_files):
        why = f"{out / damaged[0]} is not what summarize wrote (cut short or edited)"
    else:
        return
    from artifact.analyze.summarize import write_summary

    say(f"{why}: summarizing again from the records")
    write_summary(out)


def check_report_inputs(out: Path) -> None:
    """`report` reads summary.csv and verdicts.csv as the records are now: older ones
    are refused in one line naming the command that refreshes them."""
    from artifact.command import invocation
    from artifact.store import check_derived, stale_summary

    check_derived(out)  # a damaged summary or verdict table never reaches a report
    if stale := stale_summary(out):
        raise ArtifactError(
            f"'{out / 'summary.csv'}' is older than {stale} record(s): run "
            f"`{invocation()} compare {out}` first (it summarizes again), then report"
        )
    verdicts, summary = out / "verdicts.csv", out / "summary.csv"
    if (
        verdicts.is_file()
        and summary.is_file()
        and summary.stat().st_mtime_ns > verdicts.stat().st_mtime_ns
    ):
        raise ArtifactError(
            f"'{verdicts}' is older than summary.csv: run `{invocation()} compare {out}` first"
        )


def commits_line(out: Path) -> str | None:
    """A folder whose records come from several commits (summarised with --allow-mixed)
    names every one of them, not only the first record's."""
    from artifact.store import commits

    found = commits(out)
    if len(found) > 1:
        return f"records in {out} come from {len(found)} commits: {', '.join(found)}"
    return None
