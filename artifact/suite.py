"""`python -m artifact all [run flags]`: every figure into one folder, then summary,
verdicts and report (`nox -s all` calls it).

The plan's summary comes first; each figure runs in its own `python -m artifact run`
process, so one that fails leaves the others running; a figure drawn from another's
records (fig5) runs nothing. Exit 1 where any figure or stage failed, naming the failed
figures at the end; exit 2 only where the machine cannot run it at all
(artifact.launch.preflight). A SIGTERM or Ctrl-C stops the suite after the figure it
interrupted has recorded what it finished (exit 130, with the command that resumes).
"""

from __future__ import annotations

import dataclasses
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from artifact import procs
from artifact.budget import decided_not_run, disk_left, flag_value, select
from artifact.command import invocation
from artifact.core.config import default_preset
from artifact.core.errors import Terminated, interrupted_by
from artifact.figures import REGISTRY, own_records
from artifact.launch import preflight
from artifact.launch.progress import FIGURE_ENV
from artifact.plan import PlanQuery


def _has_gpu() -> bool:
    from artifact.env import device_kind

    return device_kind() != "cpu"


class Interrupted(Exception):
    """A SIGTERM or Ctrl-C while a stage ran: the stage handled it (a figure records what
    it finished), and the suite stops there."""

    def __init__(self, why: str, stage: str, figure: str = ""):
        super().__init__(why)
        self.why, self.stage, self.figure = why, stage, figure


def child(argv: list[str], env: dict[str, str] | None = None) -> tuple[int, str]:
    """`python -m artifact ARGV` to its end: its exit code, and what interrupted it ('':
    nothing). A SIGTERM or Ctrl-C meanwhile is the child's to handle, as it handles one
    alone: a SIGTERM is passed on (it may have come to this process only), a Ctrl-C is
    not (the terminal sent it to both; a second one would mean "stop now")."""
    proc = subprocess.Popen([sys.executable, "-m", "artifact", *argv], env=env)
    why = ""
    while True:
        try:
            return proc.wait(), why
        except (Terminated, KeyboardInterrupt) as e:
            why = interrupted_by(e)
            if isinstance(e, Terminated):
                proc.send_signal(signal.SIGTERM)


def run_all(
    args: list[str], say: Callable[[str], None] = print, budget_s: float | None = None
) -> int:
    """Run every figure with `args` (the flags of `run`), then summarize, compare, report.
    With `budget_s`, only the figures artifact.budget keeps; the others are recorded
    "not run" with why, so the report lists them."""
    from artifact.store import RunStore, default_out_dir

    args = list(args)
    if "--out" not in args:
        preset = flag_value(args, "--preset") or default_preset(_has_gpu())
        args += ["--out", str(default_out_dir(preset))]
    out = flag_value(args, "--out")
    nodes = int(flag_value(args, "--nnodes") or 1)  # several: the nodes share it, as `run`'s do
    if Path(out).is_dir() and nodes == 1:  # first, a folder another run writes: refused
        procs.FolderLock(Path(out)).check()
    if (rc := preflight.main(args)) != 0:
        return rc
    query = plan_query(args)
    left = _left_out(query, budget_s)
    lock = claim(args, query, Path(out), set(REGISTRY) - set(left))  # noqa: F841 (to the end)

    def artifact(*argv: str, env: dict[str, str] | None = None) -> int:
        # every stage writes under this suite's lock (procs.FolderLock)
        rc, why = child(list(argv), {**(env or os.environ), **procs.suite_env(Path(out))})
        if why:
            raise Interrupted(why, argv[0], argv[1] if argv[0] == "run" else "")
        return rc

    try:
        # the plan first: what fits, how long it takes, how much disk (artifact.plan)
        _print_plan(query)
        for fig, why in left.items():
            RunStore(Path(out)).write_status(fig, "not run", why)
        return _figures_then_stages(args, out, left, artifact, say)
    except (Interrupted, Terminated, KeyboardInterrupt) as e:  # between stages too
        if isinstance(e, Interrupted):
            stopped = f"by {e.why} during {e.stage} {e.figure}".rstrip()
        else:
            stopped = f"by {interrupted_by(e)}"
        again = args + (["--budget", f"{max(1, round(budget_s))}s"] if budget_s else [])
        print(
            f"all: interrupted {stopped}; what finished is kept in {out}\n"
            f"resume: {invocation()} all {shlex.join(again)}",
            file=sys.stderr,
        )
        return 130


def plan_query(args: list[str]) -> PlanQuery:
    """The plan of `all ARGS`: every figure, ARGS as each figure's `run` parses them, its
    repetitions fixed (the plan refuses run's --adaptive at a CPU preset, which `all` takes)."""
    from artifact.arguments import build_parser

    parsed = build_parser().parse_args(["run", next(iter(REGISTRY)), *args])  # any figure
    return dataclasses.replace(PlanQuery.of(parsed), adaptive=False)


def _print_plan(query: PlanQuery) -> None:
    """The plan's summary; one that cannot be drawn is an error line, and `all` goes on."""
    from artifact import plan
    from artifact.core.errors import ArtifactError

    try:
        plan.show(query, summary=True)
    except ArtifactError as e:
        print(f"error: {e}", file=sys.stderr, flush=True)


def _left_out(query: PlanQuery, budget_s: float | None) -> dict[str, str]:
    """{figure: why} of the figures the plan runs nothing of here (budget.decided_not_run)
    and of those a --budget leaves out."""
    decided = decided_not_run(query)
    return decided if budget_s is None else {**decided, **select(query, budget_s)[1]}


def claim(args: list[str], query: PlanQuery, out: Path, figures: set[str]):
    """Before the first stage: room for what the plan writes, the folder and its lock,
    and a rendezvous that answers. Raises ArtifactError (one line, exit 2); returns the
    lock (None for several nodes, which share the folder), held until `all` ends."""
    from artifact.store import check_path, check_space, ensure_writable

    if endpoint := flag_value(args, "--rdzv-endpoint"):
        from artifact.launch.torchrun import DEFAULT_RDZV_TIMEOUT_S, check_rendezvous

        bound = flag_value(args, "--rdzv-timeout-s")
        check_rendezvous(endpoint, float(bound) if bound else DEFAULT_RDZV_TIMEOUT_S)
    nodes = int(flag_value(args, "--nnodes") or 1)
    check_path(out)
    check_space(out, disk_left(query, out, figures), "every figure")
    ensure_writable(out)
    return procs.FolderLock(out).acquire() if nodes == 1 else None


def _figures_then_stages(args: list[str], out: str, left: dict[str, str], artifact, say) -> int:
    """Each figure not left out, then summarize, compare and report."""
    runs = [f for f in own_records() if f not in left]  # the display counts those it runs
    failed, took = [], {}
    for fig, spec in REGISTRY.items():
        if spec.records_of:  # fig5: drawn from fig4's records, never run a second time
            say(f"{fig}: drawn from the records of {spec.records}")
            continue
        if fig in left:
            say(f"{fig}: {left[fig]}")
            continue
        started = time.monotonic()
        # the run's display shows "figure k/N" (artifact/launch/progress.py)
        place = {FIGURE_ENV: f"{runs.index(fig) + 1}/{len(runs)}"}
        rc = artifact("run", fig, *args, "--only-applicable", env={**os.environ, **place})
        took[fig] = time.monotonic() - started
        say(f"{fig}: exit {rc} after {took[fig]:.0f} s")
        if rc != 0:  # 0 also when configurations were only skipped (the device cannot run them)
            failed.append(f"{fig} (exit {rc})")
    if artifact("summarize", out, "--brief") not in (0, 2):  # 2: nothing to summarize
        return 1
    for stage in ("compare", "report"):
        if artifact(stage, out):
            return 1
    say("wall time: " + ", ".join(f"{f} {s:.0f} s" for f, s in took.items()))
    say(f"results: {out}; report: {out}/report/appendix.html")
    if failed:
        print(
            f"failed: {', '.join(failed)} (why: {out}/status/, logs: {out}/logs/)", file=sys.stderr
        )
        return 1
    return 0
