"""`python -m artifact run|summarize|compare|report|env` (nox sessions call this).

Only this module prints (with launch/progress.py's live display). It parses the arguments
(artifact.arguments), builds one typed request (artifact.launch.request), calls the stage
(artifact.launch.stage: the folder's lock and plan, the ranks, their status) and prints its
outcome. Every ArtifactError becomes one line on stderr and exit code 2; every input is
checked before anything is written.
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.markdown import Markdown
from rich.markup import escape

from artifact import env as envmod
from artifact import tables
from artifact.arguments import build_parser
from artifact.command import invocation
from artifact.core.errors import ArtifactError, Terminated, interrupted_by
from artifact.core.rankjob import RankJob
from artifact.figures import spec_of
from artifact.launch import progress, request, stage
from artifact.launch.request import check_run_args  # noqa: F401 (named by `all`'s tests)
from artifact.launch.stage import STOP_FILE, writer_lock

# soft wrap, for every print: a line longer than the terminal (or than 80 columns in a
# log) stays one line, so a reason or a path is not cut mid-way and grep finds it
console = Console(soft_wrap=True)
err_console = Console(stderr=True, soft_wrap=True)


def cmd_run(args: argparse.Namespace) -> int:
    from artifact.store import RunStore

    figure = spec_of(args.figure).records  # fig5 is drawn from fig4's records
    progress.figure_of()  # a bad ARTIFACT_FIGURE_OF (nox -s all sets it) before anything is written
    r = request.build(args, figure, request.options(args, console.print), say=console.print)
    claim = stage.claim(r)
    if claim.note:
        console.print(claim.note)
    out = claim.out
    console.print(f"[bold]{figure}[/]: preset {r.preset.name}, {r.device} x{r.nproc}, out {out}")
    if done := stage.finished_already(r, claim):
        console.print(done)
        return _print_outcome(args, RunStore(out), figure, out)
    return launch_and_report(args, r, r.job(out, claim.reps))


def _launch(args, r: request.RunRequest, job: RankJob, log_path: Path):
    """The ranks, run under the live display of their progress (artifact/launch/progress.py)."""
    from artifact.launch import torchrun

    beacon = log_path.with_suffix(".progress")
    beacon.unlink(missing_ok=True)  # a killed run's beacon would show where that run was
    state = progress.State(job.figure, job.reps, time.monotonic(), progress.figure_of())
    display = progress.Display(err_console, state, beacon, log_path, getattr(args, "debug", False))
    with display:
        return torchrun.launch(log_path, job, r, hang_s=args.hang_timeout_s, echo=display.echo)


def launch_and_report(args, r: request.RunRequest, job: RankJob) -> int:
    """Start the ranks, record how they ended in status/, and print a digest of the summary."""
    from artifact.store import RunStore

    def start(log_path: Path):
        return _launch(args, r, job, log_path)

    say, warn = console.print, err_console.print
    rc = stage.launch_and_record(job, start, say, warn, shared=r.shared)
    return rc if rc is not None else _print_outcome(args, RunStore(job.out), job.figure, job.out)


def _print_outcome(args, store, figure: str, out: Path) -> int:
    """A figure that ended: its status where it is not 'ran', each configuration that did
    not run, and a digest of the summary."""
    status = store.status()[figure]
    if status["status"] != "ran":
        console.print(f"{figure}: {status['status']} ({status['reason']})")
    for config_id, st in status.get("configs", {}).items():
        console.print(f"{figure}: {config_id}: {st['status']}: {st['reason']}")
    for config_id, line in status.get("stopped", {}).items():  # --adaptive's decisions
        console.print(f"{figure}: {config_id}: {line}", markup=False, highlight=False)
    if not store.record_count():  # counted, not read: write_summary reads them
        return 0
    from artifact.analyze.summarize import write_summary

    summary = write_summary(out, allow_mixed=args.allow_mixed)
    print_digest(summary[summary["figure"] == figure], figure, out)
    return 0


def print_digest(df, figure: str, out: Path) -> None:
    """A couple of lines a configuration after a run (the whole table: summarize)."""
    console.print(
        f"[bold]{figure} summary[/] ({escape(str(out / 'summary.csv'))}; every metric: "
        f"{invocation()} summarize {escape(str(out))})"
    )
    for line in progress.digest(df):
        console.print(line, markup=False, highlight=False)


def print_summary(df, title: str) -> None:
    """The summary, one table a configuration fitted to the terminal (artifact.tables)."""
    for what, how in tables.summary(df, title, console.width):
        console.print(what, **how)


def cmd_summarize(args: argparse.Namespace) -> int:
    from artifact.analyze.summarize import write_summary

    out = Path(args.dir)
    lock = writer_lock(out)  # noqa: F841 (held until this process exits)
    summary = write_summary(out, allow_mixed=args.allow_mixed)
    if args.brief:
        configs = summary.groupby(["figure", "config_id"]).ngroups
        console.print(
            f"{out / 'summary.csv'}: {len(summary)} rows, {configs} configurations "
            f"(the table: {invocation()} summarize {escape(str(out))})"
        )
        return 0
    print_summary(summary, title=str(out / "summary.csv"))
    return 0


def cmd_env(args: argparse.Namespace) -> int:
    info = envmod.capture()
    if args.json:
        print(json.dumps(info, indent=2, sort_keys=True))
        return 0
    console.print(tables.environment(info))
    return 0


def cmd_restore_caps(args: argparse.Namespace) -> int:
    from artifact.measure import caps

    done = caps.restore_all()
    console.print(
        "\n".join(done) if done else f"nothing to restore (no saved limits in {caps.state_dir()})"
    )
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    from artifact.judge.compare import write_verdicts

    out = Path(args.dir)  # Results.load names a missing folder
    lock = writer_lock(out)  # noqa: F841 (held until this process exits)
    stage.summarize_if_stale(out, say=console.print)  # judged from the records as they are
    verdicts = write_verdicts(out)
    say_commits(out)
    for what, how in tables.verdicts(verdicts, out / "verdicts.csv"):
        console.print(what, **how)
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from artifact.report import write_report

    out = Path(args.dir)  # Results.load names a missing folder
    lock = writer_lock(out)  # noqa: F841 (held until this process exits)
    stage.check_report_inputs(out)  # summary and verdicts as fresh as the records
    report = write_report(out)
    say_commits(out)
    lines = (report / "appendix.md").read_text().splitlines()
    first = next(line for line in lines if line and not line.startswith("#"))  # past the title
    console.print(Markdown(first))  # its **bold**, not the asterisks
    console.print(f"report: {report / 'appendix.html'}")
    return 0


def say_commits(out: Path) -> None:
    """Every commit the folder's records come from, where there are several."""
    if line := stage.commits_line(out):
        console.print(line, markup=False, highlight=False)


def cmd_all(args: argparse.Namespace) -> int:
    from artifact import budget
    from artifact.suite import run_all

    run_args, budget_s = budget.pop(args.run_args)  # `all`'s own flag; the rest go to `run`
    # everything `all` will need, checked before it runs anything: the flags, and
    # expected/ (compare's input, read at the end); the folder and the rendezvous: run_all
    request.check_run_args(run_args)
    from artifact.judge.expected import load_expected

    load_expected()
    return run_all(
        run_args,
        say=lambda line: console.print(line, markup=False, highlight=False),
        budget_s=budget_s,
    )


def cmd_rehearsal(args: argparse.Namespace) -> int:
    from artifact import rehearsal

    request.check_run_args(rehearsal.checked_run_args(args.run_args))
    return rehearsal.run(
        args.run_args, say=lambda line: console.print(line, markup=False, highlight=False)
    )


def cmd_plan(args: argparse.Namespace) -> int:
    from artifact import plan

    return plan.run(args)


COMMANDS = {
    "run": cmd_run,
    "all": cmd_all,
    "rehearsal": cmd_rehearsal,
    "summarize": cmd_summarize,
    "compare": cmd_compare,
    "report": cmd_report,
    "restore-caps": cmd_restore_caps,
    "plan": cmd_plan,
    "env": cmd_env,
}


_TERMINATED: list[bool] = []


def _on_sigterm(signum, frame):
    # once: the same SIGTERM can come twice (to the process group, and forwarded by
    # `all` to the figure it runs), and a second must not cut short the first's handling
    if not _TERMINATED:
        _TERMINATED.append(True)
        raise Terminated()


def _on_sigint(signum, frame):
    """First Ctrl-C: the ranks stop after the repetition they are in. Second: now."""
    if STOP_FILE and not STOP_FILE[0].exists():
        STOP_FILE[0].touch()
        err_console.print("stopping after the current repetition (Ctrl-C again: stop now)")
        return
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    parser = build_parser()
    args, rest = parser.parse_known_args(argv)
    if args.command in ("all", "rehearsal"):  # the flags go on to each figure's `run`
        args.run_args = rest
    elif rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    signal.signal(signal.SIGTERM, _on_sigterm)
    signal.signal(signal.SIGINT, _on_sigint)
    try:
        return COMMANDS[args.command](args)
    except (KeyboardInterrupt, Terminated) as e:  # where nothing was left half-done
        err_console.print(f"interrupted by {interrupted_by(e)}", markup=False, highlight=False)
        return 130
    except ArtifactError as e:
        err_console.print(f"error: {e}", markup=False, highlight=False)
        return 2
    except Exception as e:  # a bug, not bad input: one line, the traceback with --debug
        if args.debug:
            raise
        first = (str(e).strip().splitlines() or [""])[0][:300]
        err_console.print(
            f"internal error: {type(e).__name__}: {first} "
            "(run again with --debug for the traceback)",
            markup=False,
            highlight=False,
        )
        return 1


if __name__ == "__main__":
    sys.exit(main())
