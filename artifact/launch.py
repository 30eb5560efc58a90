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
from pathlib import Path
from typing import Any

from artifact import procs

RUN_HEADER = "==== run:"  # starts each run's part of a figure's log
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
    options: dict[str, Any],
    nnodes: int = 1,
    rdzv_endpoint: str | None = None,
) -> list[str]:
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(nproc)]
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
        "artifact.worker",
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
        json.dumps(options),
    ]
    return cmd


def launch(log_path: Path, **kwargs: Any) -> int:
    """Run the ranks to completion, their output both on stderr and in `log_path`;
    returns torchrun's exit code.

    Any exception here (Ctrl-C, or the SIGTERM the CLI turns into one) stops torchrun,
    which stops its workers, before it propagates: no rank outlives its launcher's
    interruption.
    """
    log_path.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with log_path.open("a") as log:
        log.write(f"{RUN_HEADER} {' '.join(torchrun_command(**kwargs))}\n")
        log.flush()
        proc = subprocess.Popen(
            torchrun_command(**kwargs),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
            # the CLI killed (even with SIGKILL): torchrun is told, and stops its workers
            preexec_fn=lambda: procs.die_with_parent(signal.SIGTERM),
        )
        try:
            for line in proc.stdout:
                sys.stderr.write(line)  # the ranks log to stderr; the CLI prints to stdout
                log.write(line)
            return proc.wait()
        except BaseException:
            proc.terminate()  # torchrun forwards it to every worker
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
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
