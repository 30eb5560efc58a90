"""Environment capture: what ran, on what, with which stack (provenance of every record).

Nothing here imports DeepSpeed or Megatron-core (slow, noisy imports): their versions
come from package metadata. The driver version comes from the GPU device layer
(artifact.measure.device), which probes NVML and AMD-SMI defensively.
"""

from __future__ import annotations

import os
import platform
import socket
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

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


def _nccl_version() -> str | None:
    import torch

    if not torch.cuda.is_available():
        return None
    try:
        v = torch.cuda.nccl.version()
    except Exception:
        return None
    return ".".join(str(x) for x in v) if isinstance(v, tuple) else str(v)


def git_commit() -> str:
    """HEAD of the repository, with '-dirty' for uncommitted changes; env override for images."""
    if os.environ.get("ARTIFACT_GIT_COMMIT"):
        return os.environ["ARTIFACT_GIT_COMMIT"]
    try:
        head = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("-dirty" if dirty else "")


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
        "cpu_model": platform.processor() or platform.machine(),
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
