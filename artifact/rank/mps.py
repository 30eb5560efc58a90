"""An MPS control daemon of the run's own, for ranks that share a GPU (`--mps on`).

Processes on one GPU take turns on it (time-slicing); under NVIDIA's Multi-Process Service
their kernels run side by side, as threads of one process do. The daemon is started for
the run with its pipe and log folders of its own (no other job's clients reach it, and
it changes no GPU setting: compute mode, clocks and limits stay as they are), and stopped
after. The ranks learn of it through CUDA_MPS_PIPE_DIRECTORY, and their records say
whether it served them (provenance `mps`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

from artifact.core.errors import ArtifactError

ENV = "ARTIFACT_MPS"  # "1" in the ranks' environment while the run's own daemon serves them
CONTROL = "nvidia-cuda-mps-control"
SERVER = "nvidia-cuda-mps-server"
CHOICES = ("on", "off")
# a UNIX socket's path holds at most 107 bytes; MPS adds its own names under the pipe folder
_PIPE_MAX = 80


def in_use(environ: dict[str, str] | None = None) -> bool:
    return (environ if environ is not None else os.environ).get(ENV) == "1"


def folders(out: Path) -> tuple[Path, Path]:
    """The pipe and log folders: under the run's folder, the pipe in a short temporary
    folder where the run's path is too long for a socket."""
    log = out / "logs" / "mps"
    pipe = out / ".mps"
    if len(str(pipe.resolve())) > _PIPE_MAX:
        pipe = Path(tempfile.mkdtemp(prefix="ovl-mps-"))
    return pipe, log


@contextlib.contextmanager
def daemon(out: Path, control: str = CONTROL) -> Iterator[dict[str, str]]:
    """Start the daemon; yield the environment its clients need; stop it on every exit."""
    if shutil.which(control) is None:
        raise ArtifactError(
            f"--mps on needs {control} (NVIDIA's driver utilities) on PATH; accepted: --mps off"
        )
    pipe, log = folders(out)
    pipe.mkdir(parents=True, exist_ok=True)
    log.mkdir(parents=True, exist_ok=True)
    env = {"CUDA_MPS_PIPE_DIRECTORY": str(pipe), "CUDA_MPS_LOG_DIRECTORY": str(log)}
    started = subprocess.run(
        [control, "-d"], env={**os.environ, **env}, capture_output=True, text=True
    )
    if started.returncode != 0:
        why = (started.stderr or started.stdout).strip().splitlines()
        raise ArtifactError(
            f"the MPS daemon did not start ({why[-1] if why else f'exit {started.returncode}'}; "
            f"its log: {log}); accepted: --mps off"
        )
    try:
        yield env | {ENV: "1"}
    finally:
        subprocess.run(
            [control], input="quit\n", env={**os.environ, **env}, capture_output=True,
            text=True, timeout=60,
        )  # fmt: skip
