"""Environment capture: what ran, on what, with which stack (provenance of every record).

Nothing here imports DeepSpeed or Megatron-core (slow, noisy imports): their versions
come from package metadata. The driver version comes from the GPU device layer
(artifact.measure.device), which probes NVML and AMD-SMI defensively.
"""

from __future__ import annotations

import os
import platform
import re
import socket
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

from artifact import _commit
from artifact.core.errors import ArtifactError
from artifact.measure import device

REPO_ROOT = Path(__file__).resolve().parent.parent

# NCCL/RCCL settings that change collective bandwidth; recorded with every result.
COMM_ENV_VARS = (
    "NCCL_ALGO",
    "NCCL_PROTO",
    "NCCL_MAX_NCHANNELS",
    "NCCL_MIN_NCHANNELS",
    "NCCL_NVLS_ENABLE",
    "NCCL_P2P_DISABLE",
    "NCCL_SHM_DISABLE",
    "NCCL_IB_DISABLE",
    "RCCL_MSCCL_ENABLE",
    "HSA_ENABLE_SDMA",
)

# Keys that must agree for records to be summarised together (see store.check_uniform_env).
FINGERPRINT_KEYS = (
    "device_kind",
    "gpu_model",
    "gpu_count",
    "driver",
    "cuda",
    "rocm",
    "torch",
    "nccl",
    "deepspeed",
    "megatron_core",
    "git_commit",
    "image",
    "comm_env",
)


def device_kind() -> str:
    """'cuda', 'rocm' or 'cpu' for this machine."""
    import torch  # here, not at the top: the CLI answers bad input before torch loads

    if not torch.cuda.is_available():
        return "cpu"
    return "rocm" if torch.version.hip else "cuda"


def _package_version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def nccl_loaded() -> tuple[int, ...]:
    """The NCCL loaded in this process, asked at run time: torch.cuda.nccl.version() gives
    the version torch was built with, which a preloaded newer libnccl does not change."""
    import ctypes

    import torch

    try:
        lib = ctypes.CDLL("libnccl.so.2")  # the one already loaded, matched by its soname
        code = ctypes.c_int()
        if lib.ncclGetVersion(ctypes.byref(code)) == 0:
            v = code.value  # 2.19+: major * 10000 + minor * 100 + patch
            return (v // 10000, v // 100 % 100, v % 100)
    except (OSError, AttributeError):
        pass
    return tuple(torch.cuda.nccl.version())


def _nccl_version() -> str | None:
    import torch

    if not torch.cuda.is_available():
        return None
    try:
        return ".".join(str(x) for x in nccl_loaded())
    except Exception:
        return None


# a commit id as git writes it (abbreviated or whole), '-dirty' for uncommitted changes
COMMIT_ID = re.compile(r"[0-9a-f]{7,40}(-dirty)?")
COMMIT_ENV = "ARTIFACT_GIT_COMMIT"


def _checkout_commit() -> str | None:
    """HEAD of the git checkout whose top is this source tree ('-dirty' with uncommitted
    changes); None where the tree is no checkout's top (an archive, an image, a copy,
    even one unpacked inside another checkout)."""

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=REPO_ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()

    try:
        if Path(git("rev-parse", "--show-toplevel")).resolve() != REPO_ROOT:
            return None
        head = git("rev-parse", "HEAD")
        dirty = git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.CalledProcessError):
        return None
    return head + ("-dirty" if dirty else "")


def tree_commit() -> str | None:
    """The commit the source tree knows itself: its checkout's HEAD, else the one
    `git archive` or the image's build wrote into artifact/_commit.py; None for neither."""
    stamped = _commit.COMMIT.strip()
    return _checkout_commit() or (stamped if COMMIT_ID.fullmatch(stamped) else None)


def git_commit() -> str:
    """The commit of this source, from the tree itself (tree_commit). ARTIFACT_GIT_COMMIT
    may only confirm it: a hex commit id, refused otherwise and refused where it disagrees
    with the tree's own; it is taken only where the tree knows none (a bare copy)."""
    own = tree_commit()
    given = os.environ.get(COMMIT_ENV, "").strip()
    if not given:
        return own or "unknown"
    if not COMMIT_ID.fullmatch(given):
        raise ArtifactError(
            f"{COMMIT_ENV}={given!r} is not a commit id; accepted: 7 to 40 hex digits "
            f"(git rev-parse HEAD), or unset it" + (f" (this tree is {own})" if own else "")
        )
    if own and not _same_commit(own, given):
        raise ArtifactError(
            f"{COMMIT_ENV}={given} disagrees with this tree's own commit {own}; "
            f"accepted: {own.removesuffix('-dirty')[:12]} or unset"
        )
    return own or given


def _same_commit(a: str, b: str) -> bool:
    """One names the other: the same hex, one abbreviated ('-dirty' aside)."""
    a, b = a.removesuffix("-dirty"), b.removesuffix("-dirty")
    return a.startswith(b) or b.startswith(a)


def cpu_model(cpuinfo: str = "/proc/cpuinfo") -> str:
    """The CPU's model name ('AMD EPYC 9454 48-Core Processor'), from /proc/cpuinfo where
    there is one; else what platform knows (often only 'x86_64')."""
    try:
        with open(cpuinfo) as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() in ("model name", "Model") and value.strip():
                    return value.strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def capture() -> dict[str, Any]:
    """Everything provenance needs, as plain JSON-serialisable values."""
    import torch

    kind = device_kind()
    gpu_count = torch.cuda.device_count() if kind != "cpu" else 0
    gpu_model = torch.cuda.get_device_name(0) if gpu_count else None
    backend = {"cuda": "nvml", "rocm": "amdsmi"}.get(kind)
    driver = device.driver_version(backend) if backend else None
    return {
        "device_kind": kind,
        "gpu_model": gpu_model,
        "gpu_count": gpu_count,
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "driver": driver,
        "cuda": torch.version.cuda if kind == "cuda" else None,
        "rocm": torch.version.hip if kind == "rocm" else None,
        "torch": torch.__version__,
        "nccl": _nccl_version(),
        "deepspeed": _package_version("deepspeed"),
        "megatron_core": _package_version("megatron-core"),
        "nvidia_ml_py": _package_version("nvidia-ml-py"),
        "python": platform.python_version(),
        "git_commit": git_commit(),
        "image": os.environ.get("ARTIFACT_IMAGE"),
        "hostname": socket.gethostname(),
        "comm_env": {k: os.environ[k] for k in COMM_ENV_VARS if k in os.environ},
    }


def fingerprint(env: dict[str, Any]) -> dict[str, Any]:
    return {k: env.get(k) for k in FINGERPRINT_KEYS}
