"""Start an experiment's ranks through torchrun: one process a GPU, or gloo processes on CPU.

Single node uses torchrun's standalone rendezvous; several nodes use its c10d rendezvous
at --rdzv-endpoint (the same command runs under SLURM's srun, one agent a node).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from artifact.core.options import RunOptions
from artifact.run import procs
from artifact.run.progress import read_beacon

DEFAULT_HANG_S = 600.0  # no output and no progress this long: the run is hung
RUN_HEADER = "==== run:"  # starts each run's part of a figure's log
RUN_END = "==== ended:"  # ends it: how the ranks ended and the run's wall time, start-up in
# a Python exception's last line in the ranks' output ("ValueError: Type fp16 is not ...")
_ERROR_LINE = re.compile(r"^(?:\[rank\d+\]:?\s*)?([A-Za-z_.]*(?:Error|Exception|Interrupt)\b:?.*)$")


def torchrun_command(
    *,
    figure: str,
    preset: str,
    device: str,
    out: Path,
    reps: int,
    nproc: int,
    options: RunOptions,
    nnodes: int = 1,
    rdzv_endpoint: str | None = None,
) -> list[str]:
    cmd = [sys.executable, "-m", procs.TORCHRUN, "--nproc-per-node", str(nproc)]
    if nnodes == 1 and rdzv_endpoint is None:
        cmd.append("--standalone")
    else:
        cmd += [
            "--nnodes",
            str(nnodes),
            "--rdzv-backend",
            "c10d",
            "--rdzv-endpoint",
            str(rdzv_endpoint),
        ]
    cmd += [
        "-m",
        "artifact.run.worker",
        "--figure",
        figure,
        "--preset",
        preset,
        "--device",
        device,
        "--out",
        str(out),
        "--reps",
        str(reps),
        "--options",
        json.dumps(options.as_json()),
    ]
    return cmd


def child_env(device: str, environ: dict[str, str] | None = None) -> dict[str, str]:
    """The ranks' environment: DeepSpeed's accelerator follows the device the run uses.

    Left to itself DeepSpeed probes, and an image or a shell may have pinned DS_ACCELERATOR
    to a GPU kind: a CPU run then hands DeepSpeed a GPU accelerator and dies
    (`torch._C has no attribute '_cuda_setDevice'`). ROCm's torch is DeepSpeed's 'cuda' too.
    """
    env = dict(os.environ if environ is None else environ)
    env["DS_ACCELERATOR"] = "cpu" if device == "cpu" else "cuda"
    return env


@dataclass
class Outcome:
    returncode: int
    hung: str | None = None  # the watchdog's reason, when it stopped a hung run


def _watchdog(proc, progress: Path, last_output: list[float], hang_s: float, hung: list[str]):
    """Stop `proc` when neither its output nor rank 0's progress beacon moved for hang_s."""
    while proc.poll() is None:
        time.sleep(min(2.0, hang_s / 4))
        beacon = progress.stat().st_mtime if progress.is_file() else 0.0
        if time.time() - max(last_output[0], beacon) > hang_s:
            where = read_beacon(progress).get("what") or "start-up"
            hung.append(f"hung in {where}: no progress for {hang_s:.0f} s")
            proc.terminate()  # torchrun stops its workers; the read loop then ends
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
            return


def launch(
    log_path: Path,
    hang_s: float = DEFAULT_HANG_S,
    echo: Callable[[str], Any] | None = None,
    rank_env: dict[str, str] | None = None,
    **kwargs: Any,
) -> Outcome:
    """Run the ranks to completion, every line of their output in `log_path` and handed
    to `echo` (default: stderr; the CLI's display decides which lines reach the console,
    artifact/run/progress.py).

    A watchdog turns a hang (no output and no progress for `hang_s`) into a failure
    instead of a wait without end. Any exception here (Ctrl-C, or the SIGTERM the CLI
    turns into one) stops torchrun, which stops its workers, before it propagates: no
    rank outlives its launcher's interruption.
    """
    log_path.parent.mkdir(parents=True, exist_ok=True)
    progress = log_path.with_suffix(".progress")
    progress.unlink(missing_ok=True)
    env = {**child_env(kwargs["device"]), "PYTHONUNBUFFERED": "1", "ARTIFACT_HANG_S": str(hang_s)}
    env |= rank_env or {}  # the CLI's word on the GPUs' other processes (procs.gpus_idle_env)
    cli = os.getpid()  # torchrun's parent: if it is gone before torchrun's prctl, so is torchrun
    with log_path.open("a", buffering=1) as log:  # by line: `tail -f` follows the run
        started = time.monotonic()
        log.write(f"{RUN_HEADER} {' '.join(torchrun_command(**kwargs))}\n")
        log.flush()
        proc = subprocess.Popen(
            torchrun_command(**kwargs),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
            # A terminal's Ctrl-C goes to its foreground process group: torchrun gets a
            # group of its own, so the CLI alone decides (stop between repetitions, or
            # now on a second Ctrl-C; the CLI then terminates torchrun itself, below).
            # The CLI killed outright (SIGKILL): torchrun is killed too, and its death
            # kills each worker (artifact/run/worker.py, before its imports). Not SIGTERM:
            # torchrun's graceful shutdown once outlived the 10 s a killed run is given
            # to leave no process (CI, tests/test_interrupt.py), and with nobody left to
            # record anything it has nothing to do.
            start_new_session=True,
            preexec_fn=lambda: procs.die_with_parent(signal.SIGKILL, parent=cli),
        )
        last_output, hung = [time.time()], []
        watch = threading.Thread(
            target=_watchdog, args=(proc, progress, last_output, hang_s, hung), daemon=True
        )
        watch.start()
        try:
            for line in proc.stdout:
                last_output[0] = time.time()
                log.write(line)
                (echo or sys.stderr.write)(line)
            rc = proc.wait()
            watch.join(timeout=60)
            log.write(f"{RUN_END} exit {rc} after {time.monotonic() - started:.1f} s\n")
            return Outcome(rc, hung[0] if hung else None)
        except BaseException:
            # Interrupted: stop torchrun (it forwards the signal to every worker) and send
            # whatever the ranks still print, tracebacks of the interruption included, to
            # the log only. A second Ctrl-C here kills at once.
            proc.terminate()
            try:
                rest, _ = proc.communicate(timeout=30)
            except BaseException:
                proc.kill()
                rest, _ = proc.communicate()
            log.write(rest or "")
            log.write(f"{RUN_END} interrupted after {time.monotonic() - started:.1f} s\n")
            raise


def last_error(log_path: Path) -> str | None:
    """The last exception line the ranks printed, if any."""
    if not log_path.is_file():
        return None
    found = None
    text = log_path.read_text(errors="replace")
    for line in text[text.rfind(RUN_HEADER) :].splitlines():  # this run's lines only
        m = _ERROR_LINE.match(line.strip())
        if m and not m.group(1).startswith(("torch.distributed.elastic", "ChildFailedError")):
            found = m.group(1)
    return found[:300] if found else None
