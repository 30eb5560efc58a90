"""`python -m artifact all [run flags]`: every figure into one folder, then summary,
verdicts and report (`nox -s all` calls it).

The plan's summary comes first; each figure runs in its own `python -m artifact run`
process, so one that fails leaves the others running; a figure drawn from another's
records (fig5) runs nothing. Exit 1 where any figure or stage failed, naming the failed figures at the end; exit 2
only where the machine cannot run it at all (artifact.run.preflight).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from artifact.core.config import default_preset
from artifact.figures import REGISTRY, own_records
from artifact.run import preflight
from artifact.run.progress import FIGURE_ENV


def _value(args: list[str], flag: str) -> str | None:
    return args[args.index(flag) + 1] if flag in args and args.index(flag) + 1 < len(args) else None


def passed(args: list[str], flags: tuple[str, ...]) -> list[str]:
    """The `flag value` pairs of `flags` that `args` (run's flags) holds: what the plan
    takes of them."""
    return [x for k in flags if k in args for x in (k, _value(args, k) or "")]


def _has_gpu() -> bool:
    from artifact.env import device_kind

    return device_kind() != "cpu"


def run_all(
    args: list[str], say: Callable[[str], None] = print, budget_s: float | None = None
) -> int:
    """Run every figure with `args` (the flags of `run`), then summarize, compare, report.
    With `budget_s`, only the figures artifact.budget keeps; the others are recorded
    "not run" with why, so the report lists them."""
    from artifact.store import RunStore, default_out_dir

    if (rc := preflight.main(args)) != 0:
        return rc
    args = list(args)
    if "--out" not in args:
        preset = _value(args, "--preset") or default_preset(_has_gpu())
        args += ["--out", str(default_out_dir(preset))]
    out = _value(args, "--out")

    def artifact(*argv: str, env: dict[str, str] | None = None) -> int:
        return subprocess.run([sys.executable, "-m", "artifact", *argv], env=env).returncode

    # the plan first: what fits, how long it takes, how much disk (artifact.plan)
    at = passed(args, ("--preset", "--gpus", "--emulate-world"))
    if artifact("plan", "--summary", *at) not in (0, 2):  # 2: a plan it cannot draw
        return 1
    left: dict[str, str] = {}
    if budget_s is not None:
        from artifact.budget import select

        _, left = select(args, budget_s)
        for fig, why in left.items():
            RunStore(Path(out)).write_status(fig, "not run", why)
    runs = own_records()
    failed, took = [], {}
    for fig, spec in REGISTRY.items():
        if spec.records_of:  # fig5: drawn from fig4's records, never run a second time
            say(f"{fig}: drawn from the records of {spec.records}")
            continue
        if fig in left:
            say(f"{fig}: {left[fig]}")
            continue
        started = time.monotonic()
        # the run's display shows "figure k/N" (artifact/run/progress.py)
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
