import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def run_cli(
    *args: str, timeout: float = 300, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """`python -m artifact ARGS` in a subprocess, as a user would run it (`env`: extra
    variables, e.g. the capability check's seams)."""
    env = {**os.environ, "COLUMNS": "120", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "artifact", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


def run_benchmark(
    name: str, *args: str, timeout: float = 300, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """`python benchmarks/NAME.py ARGS` from the repository root (`env`: extra variables)."""
    return subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / f"{name}.py"), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


@pytest.fixture
def cli():
    return run_cli


def tree(path: Path) -> list[str]:
    return sorted(str(p.relative_to(path)) for p in path.rglob("*")) if path.exists() else []


def processes_naming(text: str) -> list[str]:
    """Command lines of the live processes (other than this one) that mention `text`."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if text in cmd:
            found.append(cmd)
    return found


def free_port() -> int:
    """A TCP port no process holds now (the tests run on several processes at once)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spawn_gloo(worker, nprocs: int = 2) -> dict:
    """Run `worker(rank, port, results)` in `nprocs` processes; their shared results dict."""
    import torch.multiprocessing as mp

    manager = mp.Manager()
    results = manager.dict()
    mp.spawn(worker, args=(free_port(), results), nprocs=nprocs, join=True)
    return dict(results)


def cpu_context(out: Path, figure: str, reps: int = 1):
    """One rank on the CPU at the tiny preset, writing under `out`: the runner's context
    for tests that drive runner.measure_repetition in-process."""
    import torch

    from artifact.core.config import get_preset
    from artifact.rank.runner import RunContext
    from artifact.store import RunStore

    return RunContext(
        figure=figure,
        preset=get_preset("tiny"),
        device=torch.device("cpu"),
        rank=0,
        world_size=1,
        store=RunStore(out),
        provenance={},
        reps=reps,
        warmup=0,
        iters=1,
    )
