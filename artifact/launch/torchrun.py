"""Start an experiment's ranks through torchrun: one process a GPU, or gloo processes on CPU.

Single node uses torchrun's standalone rendezvous; several nodes use its c10d rendezvous
at --rdzv-endpoint (the same command runs under SLURM's srun, one agent a node).
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from artifact import procs
from artifact.core.errors import ArtifactError
from artifact.core.rankjob import RankJob
from artifact.launch.progress import read_beacon
from artifact.store import RUN_END, RUN_HEADER

if TYPE_CHECKING:  # request.py imports this module (the rendezvous check, its default)
    from artifact.launch.request import RunRequest

DEFAULT_HANG_S = 600.0  # no output and no progress this long: the run is hung
# a Python exception's last line in the ranks' output ("ValueError: Type fp16 is not ...")
_ERROR_LINE = re.compile(r"^(?:\[rank\d+\]:?\s*)?([A-Za-z_.]*(?:Error|Exception|Interrupt)\b:?.*)$")
# a rank's own one-line error (worker.main: an ArtifactError, e.g. a full disk)
_RANK_ERROR = re.compile(r"^(?:\[rank\d+\]:?\s*)?error: (.*)$")
# torchrun's account of the rank that failed first, when a signal ended it
_ROOT_CAUSE = re.compile(
    r"Root Cause.*?rank\s*:\s*(\d+).*?traceback\s*:\s*Signal (\d+) \((\w+)\)", re.S
)
DEFAULT_RDZV_TIMEOUT_S = 60.0


def torchrun_command(job: RankJob, r: RunRequest) -> list[str]:
    """torchrun's command line: its ranks on this node (and the rendezvous of several
    nodes), each a worker with the job as its one argument."""
    cmd = [sys.executable, "-m", procs.TORCHRUN, "--nproc-per-node", str(r.nproc)]
    if r.nnodes == 1 and r.rdzv_endpoint is None:
        cmd.append("--standalone")
    else:
        cmd += [
            "--nnodes",
            str(r.nnodes),
            "--rdzv-backend",
            "c10d",
            "--rdzv-endpoint",
            str(r.rdzv_endpoint),
            # the nodes' wait for each other, bounded as the CLI's reach of the endpoint is
            "--rdzv-conf",
            f"join_timeout={max(1, math.ceil(r.rdzv_timeout_s))}",
        ]
    # The job inline, not a file's path: the log's command (shell-quoted) then reruns as
    # it is, with nothing beside it to keep or to go stale
    return [*cmd, "-m", "artifact.rank.worker", "--job", job.to_json()]


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
    error: str | None = None  # a rank's own one-line error (an ArtifactError: a full disk)


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
    job: RankJob,
    r: RunRequest,
    hang_s: float = DEFAULT_HANG_S,
    echo: Callable[[str], Any] | None = None,
) -> Outcome:
    """Run the ranks to completion, every line of their output in `log_path` and handed
    to `echo` (default: stderr; the CLI's display decides which lines reach the console,
    artifact/launch/progress.py).

    A watchdog turns a hang (no output and no progress for `hang_s`) into a failure
    instead of a wait without end. Any exception here (Ctrl-C, or the SIGTERM the CLI
    turns into one) stops torchrun, which stops its workers, before it propagates: no
    rank outlives its launcher's interruption.
    """
    log_path.parent.mkdir(parents=True, exist_ok=True)
    progress = log_path.with_suffix(".progress")
    progress.unlink(missing_ok=True)
    env = {**child_env(job.device), "PYTHONUNBUFFERED": "1", "ARTIFACT_HANG_S": str(hang_s)}
    env |= r.rank_env  # the CLI's word on the GPUs' other processes (procs.gpus_idle_env)
    cmd = torchrun_command(job, r)
    with _Log(log_path) as log:  # by line: `tail -f` follows the run
        started = time.monotonic()
        log.write(f"{RUN_HEADER} {shlex.join(cmd)}\n")
        log.flush()
        proc = _start(cmd, env)
        try:
            return _follow(proc, log, progress, hang_s, echo or sys.stderr.write, started)
        except BaseException:
            _stop(proc, log, started)
            raise


def _start(cmd: list[str], env: dict[str, str]) -> subprocess.Popen:
    """torchrun, in a process group of its own, killed with this process."""
    cli = os.getpid()  # torchrun's parent: if it is gone before torchrun's prctl, so is torchrun
    return subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        # A terminal's Ctrl-C goes to its foreground process group: torchrun gets a
        # group of its own, so the CLI alone decides (stop between repetitions, or
        # now on a second Ctrl-C; the CLI then terminates torchrun itself, _stop).
        # The CLI killed outright (SIGKILL): torchrun is killed too, and its death
        # kills each worker (artifact/rank/worker.py, before its imports). Not SIGTERM:
        # torchrun's graceful shutdown once outlived the 10 s a killed run is given
        # to leave no process (CI, tests/test_interrupt.py), and with nobody left to
        # record anything it has nothing to do.
        start_new_session=True,
        preexec_fn=lambda: procs.die_with_parent(signal.SIGKILL, parent=cli),
    )


def _follow(proc, log: _Log, progress: Path, hang_s: float, echo, started: float) -> Outcome:
    """The ranks' output into the log and to `echo` until torchrun exits, under the
    watchdog; how they ended."""
    last_output, hung = [time.time()], []
    watch = threading.Thread(
        target=_watchdog, args=(proc, progress, last_output, hang_s, hung), daemon=True
    )
    watch.start()
    shown = _Shown(echo)
    for line in proc.stdout:
        last_output[0] = time.time()
        log.write(line)
        if not hung:  # once stopped as hung, the ranks' tracebacks go to the log only
            shown(line)
    rc = proc.wait()
    watch.join(timeout=60)
    log.write(f"{RUN_END} exit {rc} after {time.monotonic() - started:.1f} s\n")
    return Outcome(rc, hung[0] if hung else None, shown.error)


def _stop(proc, log: _Log, started: float) -> None:
    """Interrupted: stop torchrun (it forwards the signal to every worker) and send
    whatever the ranks still print, tracebacks of the interruption included, to the log
    only. A second Ctrl-C here kills at once."""
    proc.terminate()
    try:
        rest, _ = proc.communicate(timeout=30)
    except BaseException:
        proc.kill()
        rest, _ = proc.communicate()
    log.write(rest or "")
    log.write(f"{RUN_END} interrupted after {time.monotonic() - started:.1f} s\n")


class _Log:
    """The figure's log, line-buffered. A full disk stops the log, not the run: the lines
    still reach the console, and `lost` says why the log ends early."""

    def __init__(self, path: Path):
        self.path, self.lost = path, ""
        try:
            self.f = path.open("a", buffering=1)
        except OSError as e:
            self.f, self.lost = None, e.strerror or str(e)

    def __enter__(self) -> _Log:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.f is not None:
            with contextlib.suppress(OSError):
                self.f.close()

    def write(self, text: str) -> None:
        if self.f is None:
            return
        try:
            self.f.write(text)
        except OSError as e:
            self.lost, self.f = e.strerror or str(e), None

    def flush(self) -> None:
        self.write("")


class _Shown:
    """The console's share of the ranks' output: once a rank has said its one-line
    `error: ...` (worker.main), what follows (the other ranks losing their peer,
    torchrun's report) goes to the log only."""

    def __init__(self, echo: Callable[[str], Any]):
        self.echo, self.error = echo, None

    def __call__(self, line: str) -> None:
        if self.error is not None:
            return
        if m := _RANK_ERROR.match(line.strip()):
            self.error = m.group(1)[:300]  # the CLI's last line says it
        else:
            self.echo(line)


def last_error(log_path: Path) -> str | None:
    """Why the ranks failed, from this run's part of the log: a rank's own one-line error
    (the first), else the last exception line, else the signal that killed a rank."""
    if not log_path.is_file():
        return None
    found = None
    text = log_path.read_text(errors="replace")
    text = text[text.rfind(RUN_HEADER) :]  # this run's lines only
    for line in text.splitlines():
        if m := _RANK_ERROR.match(line.strip()):
            return m.group(1)[:300]
        m = _ERROR_LINE.match(line.strip())
        if m and not m.group(1).startswith(("torch.distributed.elastic", "ChildFailedError")):
            found = m.group(1)
    if found is None and (m := _ROOT_CAUSE.search(text)):
        rank, number, name = m.groups()
        return f"rank {rank} was killed by {name} (signal {number})"
    return found[:300] if found else None


def _is_local(family: int, address: str) -> bool:
    """Whether `address` is one of this machine's: binding to it works only here."""
    try:
        with socket.socket(family, socket.SOCK_STREAM) as s:
            s.bind((address, 0))
        return True
    except OSError:
        return False


def _resolve(host: str, port: int, timeout_s: float) -> list[tuple]:
    """getaddrinfo within `timeout_s` (a resolver can stall for tens of seconds)."""
    box: list = []

    def look() -> None:
        try:
            box.append(socket.getaddrinfo(host, port, type=socket.SOCK_STREAM))
        except OSError as e:
            box.append(e)

    t = threading.Thread(target=look, daemon=True)
    t.start()
    t.join(timeout_s)
    if not box:
        raise OSError(f"no answer from the resolver in {timeout_s:g} s")
    if isinstance(box[0], OSError):
        raise box[0]
    return box[0]


def check_rendezvous(endpoint: str, timeout_s: float = DEFAULT_RDZV_TIMEOUT_S) -> None:
    """Before torchrun starts: the rendezvous' host resolves and, where another machine
    hosts it, answers on its port within `timeout_s` (tried each second: its node may
    start a little later). A host of this machine is torchrun's own to start. Else one
    line, "cannot reach the rendezvous at HOST:PORT (why)": torchrun itself waited about
    two minutes and printed 94 lines of tracebacks."""
    host, _, port = endpoint.rpartition(":")
    host = host.strip("[]")
    deadline = time.monotonic() + timeout_s
    hint = "check --rdzv-endpoint, start the node that hosts it, or raise --rdzv-timeout-s"
    try:
        infos = _resolve(host, int(port), timeout_s)
    except OSError as e:
        why = e.strerror or str(e)
        raise ArtifactError(
            f"cannot reach the rendezvous at {endpoint} (host {host!r} not found: {why}); {hint}"
        ) from None
    if any(_is_local(family, addr[0]) for family, _, _, _, addr in infos):
        return
    why = "no answer"
    while True:
        left = deadline - time.monotonic()
        try:
            with socket.create_connection((host, int(port)), timeout=max(0.1, min(5.0, left))):
                return
        except OSError as e:
            why = e.strerror or str(e) or type(e).__name__
        if time.monotonic() + 1 >= deadline:
            raise ArtifactError(
                f"cannot reach the rendezvous at {endpoint} ({why}, for {timeout_s:g} s); {hint}"
            )
        time.sleep(1)
