"""Start an experiment's ranks through torchrun: one process a GPU, or gloo processes on CPU.

Single node uses torchrun's standalone rendezvous; several nodes use its c10d rendezvous
at --rdzv-endpoint (the same command runs under SLURM's srun, one agent a node).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any


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


def child_env(device: str, environ: dict[str, str] | None = None) -> dict[str, str]:
    """The ranks' environment: DeepSpeed's accelerator follows the device the run uses.

    Left to itself DeepSpeed probes, and an image or a shell may have pinned DS_ACCELERATOR
    to a GPU kind: a CPU run then hands DeepSpeed a GPU accelerator and dies
    (`torch._C has no attribute '_cuda_setDevice'`). ROCm's torch is DeepSpeed's 'cuda' too.
    """
    env = dict(os.environ if environ is None else environ)
    env["DS_ACCELERATOR"] = "cpu" if device == "cpu" else "cuda"
    return env


def launch(**kwargs: Any) -> int:
    """Run the ranks to completion; returns torchrun's exit code."""
    cmd = torchrun_command(**kwargs)
    return subprocess.run(cmd, env=child_env(kwargs["device"]), check=False).returncode
