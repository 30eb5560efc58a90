"""One process tree, one fate; one writer a results folder.

- `die_with_parent()`: a process asks the kernel to kill it when its parent dies
  (Linux prctl PR_SET_PDEATHSIG). torchrun starts every worker in a session of its own,
  so `kill -9` of the launcher's process group used to leave the workers measuring and
  writing; now the CLI's death kills torchrun, and torchrun's kills the workers.
- `FolderLock`: a run holds an exclusive flock on OUT/.run.lock for its whole life; a
  second run into the same folder is refused at once, naming the holder.
- `clear_stale_build_locks()`: torch's extension loader guards a build with a lock file
  that a killed build leaves behind; the next run then waits on it forever, silently.
- `reap_group_on_exit()`: a rank's own children (ninja and the compilers of DeepSpeed's
  first-use op build) die with the rank, however it dies; PR_SET_PDEATHSIG reaches only
  the rank itself, and an orphaned build once outlived a `kill -9` by 75 s.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import logging
import os
import signal
import sys
import time
from pathlib import Path

from artifact.core.errors import ArtifactError

log = logging.getLogger(__name__)
PR_SET_PDEATHSIG = 1


# The module torchrun runs as (artifact.launch.torchrun): a rank's parent's command line holds it.
TORCHRUN = "torch.distributed.run"


def die_with_parent(sig: int = signal.SIGKILL, parent: int | str | None = None) -> None:
    """Have the kernel send `sig` to this process when its parent exits (Linux only).

    `parent` is the parent this process should still have: its PID, or a string its
    command line holds. A parent that died before the prctl took effect sends nothing
    (the race prctl(2) describes): this process, already orphaned, then dies at once.
    A rank killed with its launcher while still importing torch used to live on,
    waiting for a rendezvous that could not come."""
    if not sys.platform.startswith("linux"):
        return
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, sig)
    if parent is None:
        return
    ppid = os.getppid()
    alive = ppid == parent if isinstance(parent, int) else parent in _cmdline(ppid)
    if not alive:
        os.kill(os.getpid(), sig)


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
    except OSError:
        return ""


# `all` holds its folder's lock for the whole suite and names the folder here for the
# stages it starts (run, summarize, compare, report), which then write under its lock
SUITE_LOCK_ENV = "ARTIFACT_SUITE_LOCK"


class FolderLock:
    """An exclusive lock on a results folder, held until `release()` or process exit.

    Every command that writes into a folder takes it (run, all, summarize, compare,
    report). A stage that `all` started finds the lock held by its parent, `all`, which
    named the folder in SUITE_LOCK_ENV: it writes under that lock."""

    def __init__(self, out: Path):
        self.path = Path(out) / ".run.lock"
        self.fd: int | None = None

    def _lock(self) -> int | None:
        """The locked file's descriptor; None where `all`, our parent, holds the lock."""
        folder = self.path.parent
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as e:  # a read-only folder, or no inode left
            raise ArtifactError(
                f"cannot write to output folder '{folder}': {e.strerror}; give another --out"
            ) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 200).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            pid = holder.split()[0]
            if pid == str(os.getppid()) and _held_for_us(folder):
                return None  # `all`, our parent, holds it for its stages
            cmd = _cmdline(int(pid)) if pid.isdigit() else ""
            raise ArtifactError(
                f"'{folder}' is in use by another run (pid {pid}: {cmd or holder}); "
                "wait for it, or give another --out"
            ) from None
        return fd

    def acquire(self) -> FolderLock:
        folder = self.path.parent
        existed = self.path.exists()
        if (fd := self._lock()) is None:
            return self
        try:
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()} {_cmdline(os.getpid())}\n".encode())
        except OSError as e:  # a full disk: leave no empty lock file behind
            if not existed:
                self.path.unlink(missing_ok=True)
            os.close(fd)
            raise ArtifactError(
                f"cannot write to output folder '{folder}': {e.strerror}; "
                "free some space, or give another --out"
            ) from None
        self.fd = fd
        return self

    def check(self) -> None:
        """Refuse a folder another run holds (ArtifactError, as acquire does), taking
        nothing and leaving no lock file it created: for a refusal before anything else
        is checked or written; the run acquires later."""
        existed = self.path.exists()
        if (fd := self._lock()) is None:
            return
        if not existed:
            self.path.unlink(missing_ok=True)
        os.close(fd)

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)  # closing drops the flock
            self.fd = None


def _held_for_us(folder: Path) -> bool:
    held = os.environ.get(SUITE_LOCK_ENV)
    return bool(held) and Path(held).resolve() == folder.resolve()


def suite_env(out: Path) -> dict[str, str]:
    """The environment entry by which `all`'s stages write under its lock."""
    return {SUITE_LOCK_ENV: str(Path(out).resolve())}


def reap_group_on_exit() -> None:
    """Kill every process this one started once it is gone, however it ends (Linux only).

    A rank's children: torch's extension loader runs ninja, and ninja puts each compiler
    in a process group of its own (so that a terminal's Ctrl-C does not reach it), so
    only the session holds them all; torchrun starts each rank in a session of its own.
    A forked watcher waits on a pipe whose only writer is this process (non-inheritable:
    the children it execs never hold it); at this process's end, SIGKILL included, the
    read returns and the watcher kills every process of the session, itself last. Where
    this process does not lead its session (a hand-made launch), its own process group
    only: a terminal's session is not ours to kill."""
    if not sys.platform.startswith("linux"):
        return
    leads_session = os.getsid(0) == os.getpid()
    if not leads_session and os.getpgid(0) != os.getpid():
        os.setpgid(0, 0)
    read_end, write_end = os.pipe()  # both close-on-exec (PEP 446)
    if os.fork() == 0:  # the watcher
        try:
            os.close(write_end)
            for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
                signal.signal(sig, signal.SIG_IGN)  # torchrun signals the group: not us
            devnull = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):  # hold no pipe of torchrun's open: its reader waits on it
                os.dup2(devnull, fd)
            os.closerange(3, read_end)
            os.closerange(read_end + 1, 65536)
            while os.read(read_end, 1):
                pass
            if leads_session:
                kill_session(os.getsid(0))
            os.killpg(os.getpgid(0), signal.SIGKILL)
        finally:
            os._exit(0)
    os.close(read_end)
    _WATCH.append(write_end)  # kept open for this process's life


def _session(pid: int) -> int:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0
    return int(stat[stat.rfind(")") + 2 :].split()[3])  # state, ppid, pgrp, session


def kill_session(sid: int) -> None:
    """SIGKILL every process of session `sid` but this one; again while any is left (a
    build may start a compiler between one look and the kill)."""
    me = os.getpid()
    for _ in range(20):
        found = [
            int(e.name)
            for e in Path("/proc").iterdir()
            if e.name.isdigit() and int(e.name) != me and _session(int(e.name)) == sid
        ]
        if not found:
            return
        for pid in found:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


_WATCH: list[int] = []


def extensions_dir() -> Path:
    """Where torch's C++ extension loader builds (TORCH_EXTENSIONS_DIR or its default)."""
    env = os.environ.get("TORCH_EXTENSIONS_DIR")
    return Path(env) if env else Path.home() / ".cache" / "torch_extensions"


# torch's loader builds `op` in <root>/<op>/ when TORCH_EXTENSIONS_DIR is set, else in
# ~/.cache/torch_extensions/pyXY_cpu/<op>/ (cpp_extension._get_build_directory): look at both
LAYOUTS = ("{op}", "*/{op}")


def built(op: str) -> bool:
    """Whether torch's extension loader already built `op` (either layout)."""
    root = extensions_dir()
    return any(any(root.glob(f"{layout.format(op=op)}/{op}.so")) for layout in LAYOUTS)


def _builders(build_dir: Path) -> list[int]:
    """The live processes compiling in `build_dir` (torch runs ninja there; the
    compilers name it in their arguments). A rank waiting on the lock is not building:
    removing the lock is what frees it."""
    me, found = os.getpid(), []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            cwd = os.readlink(entry / "cwd")
        except OSError:
            cwd = ""
        if cwd == str(build_dir) or str(build_dir) in _cmdline(int(entry.name)):
            found.append(int(entry.name))
    return found


def _ppid(pid: int) -> int:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0
    return int(stat[stat.rfind(")") + 2 :].split()[1])  # after the command's parentheses


def orphaned(pid: int) -> bool:
    """Whether a build process has lost the Python process that started it: no ancestor
    below PID 1 runs Python (torch's loader runs ninja from the rank). Such a build
    belongs to a run that was killed, and nobody will ever release its lock."""
    seen = set()
    pid = _ppid(pid)
    while pid > 1 and pid not in seen:
        seen.add(pid)
        if "python" in _cmdline(pid).split(" ")[0]:
            return False
        pid = _ppid(pid)
    return True


# A build lock with no compiler running is stale only once this old: torch takes the lock
# before it starts ninja (26 ms later on 2 cores), and a lock removed in that gap failed
# the build that held it (ImportError in the other run)
STALE_LOCK_AGE_S = 30.0


def clear_stale_build_locks(
    root: Path | None = None,
    say=None,
    clock=time.time,
    sleep=time.sleep,
    min_age_s: float = STALE_LOCK_AGE_S,
) -> list[Path]:
    """Remove extension build locks no live build can hold; returns what was removed.
    A build orphaned by a killed run is killed first (it would race the next build). A
    lock younger than `min_age_s` with no builder yet is waited for (`say` names it once):
    it becomes a live build (left alone), goes away, or grows old enough to be stale."""
    removed = []
    root = root or extensions_dir()
    locks = {lock for layout in LAYOUTS for lock in root.glob(layout.format(op="*") + "/lock")}
    for lock in sorted(locks):
        builders = _builders(lock.parent)
        if builders and all(orphaned(pid) for pid in builders):
            for pid in builders:
                log.warning("killing pid %d (%s): a build a killed run left", pid, _cmdline(pid))
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            builders = []
        if not builders and _settled_stale(lock, say, clock, sleep, min_age_s):
            lock.unlink(missing_ok=True)
            removed.append(lock)
    return removed


def _settled_stale(lock: Path, say, clock, sleep, min_age_s: float) -> bool:
    """Whether a lock with no builder is stale: old enough, or it stays builder-less until
    it is (a young one may be a build between taking its lock and starting ninja)."""
    waited = False
    while True:
        try:
            age = clock() - lock.stat().st_mtime
        except OSError:
            return False  # gone: its build finished
        if age >= min_age_s:
            return True
        if _builders(lock.parent):
            return False  # a live build holds it
        if not waited and say is not None:
            say(
                f"waiting up to {min_age_s - age:.0f} s for a build lock another run took just now: {lock}"
            )
        waited = True
        sleep(min(1.0, min_age_s - age))


def other_gpu_processes(
    gpus: dict[int, object], ours: set[int], visible_only: bool = False
) -> list[str]:
    """'GPU i: pid P (command)' for every compute process on `gpus` (index -> a
    measure.device Device) that is not one of `ours`.

    `visible_only`: count only processes this machine's /proc shows. Inside a container
    the driver may report host pids, our own ranks' among them, which /proc here does
    not show: while our ranks run, such pids cannot be told from theirs."""
    found = []
    for index, gpu in gpus.items():
        for pid in gpu.compute_pids():
            cmd = _cmdline(pid)
            if pid in ours or (visible_only and not cmd):
                continue
            found.append(f"GPU {index}: pid {pid} ({cmd or 'another user or container'})")
    return found


# How the CLI tells the ranks about the GPUs' other processes (launch puts them in the
# ranks' environment): whether --allow-shared-device was given (runner.check_gpu_alone),
# and the processes found before the run (worker: every record's provenance names them).
ALLOW_SHARED_ENV = "ARTIFACT_ALLOW_SHARED_DEVICE"
SHARED_PROCESSES_ENV = "ARTIFACT_SHARED_GPU_PROCESSES"


def gpus_idle_env(nproc: int, allow: bool) -> tuple[dict[str, str], list[str]]:
    """Before anything is measured: refuse GPUs another job is using (unless `allow`,
    --allow-shared-device). Returns the ranks' environment entries and the processes
    found; without telemetry nothing can tell, and both are empty (the report says
    there was none)."""
    from artifact.measure import device as gpu_layer

    gpus = {}
    for i in (gpu_layer.physical_index(rank) for rank in range(nproc)):
        try:
            gpus[i] = gpu_layer.open_gpu(i)
        except gpu_layer.Unavailable:
            return {}, []
    try:
        others = other_gpu_processes(gpus, {os.getpid()})
    finally:
        for g in gpus.values():
            g.close()
    refuse_shared(others, allow)
    env = {ALLOW_SHARED_ENV: "1" if allow else "0"}
    if others:
        env[SHARED_PROCESSES_ENV] = "; ".join(others)
    return env, others


def refuse_shared(others: list[str], allow: bool) -> None:
    """A GPU another job uses would put that job's load into every slowdown and power
    number: refused unless the user says so (the records then name the processes)."""
    if others and not allow:
        raise ArtifactError(
            f"the GPU is in use: {'; '.join(others)}; measuring beside it would mix its "
            "load into every number: stop it, or pass --allow-shared-device"
        )
