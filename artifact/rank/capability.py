"""Can this device run a configuration? Asked before each configuration is built.

Two questions, each answered by the backend itself rather than assumed:
- the precision: DeepSpeed's accelerator says whether FP16 / BF16 work (on a CPU it asks
  oneDNN, which on CPUs without AVX512-FP16 or AMX says no); TF32 exists only on NVIDIA
  GPUs of compute capability 8.0 (Ampere) or newer;
- the memory: a configuration's estimated peak (artifact.estimate.memory) against the memory
  free on the device now.

A configuration that cannot run is recorded "not run: <reason>" and its figure goes on.

Seams for tests and for users who know better (both read in every rank):
    ARTIFACT_PRECISION_SUPPORT="fp16=no,bf16=yes"   force the precision answer
    ARTIFACT_FREE_MEMORY_GIB=12                     force the free-memory answer
"""

from __future__ import annotations

import os

import torch

from artifact import placement
from artifact.core import host
from artifact.core.config import PRECISIONS
from artifact.core.errors import ArtifactError, bad_choice
from artifact.core.units import GIB
from artifact.estimate import memory

PRECISION_ENV = "ARTIFACT_PRECISION_SUPPORT"
FREE_MEMORY_ENV = "ARTIFACT_FREE_MEMORY_GIB"


def _forced_precisions() -> dict[str, bool]:
    forced: dict[str, bool] = {}
    for item in filter(None, os.environ.get(PRECISION_ENV, "").split(",")):
        name, _, answer = item.strip().partition("=")
        if name not in PRECISIONS:
            raise bad_choice(f"precision in {PRECISION_ENV}", name, PRECISIONS)
        if answer not in ("yes", "no"):
            raise bad_choice(f"answer for {name} in {PRECISION_ENV}", answer, ("yes", "no"))
        forced[name] = answer == "yes"
    return forced


def _backend_supports(device: torch.device, precision: str) -> bool:
    if precision == "fp32":
        return True
    if precision == "tf32":
        return (
            device.type == "cuda"
            and torch.version.hip is None
            and torch.cuda.get_device_capability(device) >= (8, 0)
        )
    from deepspeed.accelerator import get_accelerator

    accel = get_accelerator()
    return bool(accel.is_fp16_supported() if precision == "fp16" else accel.is_bf16_supported())


def precision_unsupported(device: torch.device, precision: str) -> str | None:
    """Why `device` cannot run `precision`, in plain words; None when it can."""
    forced = _forced_precisions()
    if precision in forced:
        ok = forced[precision]
        how = f" (forced by {PRECISION_ENV})"
    else:
        ok = _backend_supports(device, precision)
        how = ""
    if ok:
        return None
    where = torch.cuda.get_device_name(device) if device.type == "cuda" else "this CPU"
    if precision == "tf32":
        return f"TF32 exists only on NVIDIA GPUs of the Ampere generation or newer, not on {where}{how}"
    return (
        f"{precision.upper()} is not supported on {where}, as DeepSpeed's accelerator reports{how}"
    )


def free_memory_bytes(device: torch.device) -> int:
    """Memory free for a new configuration: device memory on a GPU (a rank's share where K
    ranks share it); on a CPU the host's
    available memory shared by the ranks on it (each builds its own model), as the plan
    budgets it."""
    forced = os.environ.get(FREE_MEMORY_ENV)
    if forced:
        try:
            return int(float(forced) * GIB)
        except ValueError:
            raise ArtifactError(f"{FREE_MEMORY_ENV}={forced!r} is not a number of GiB") from None
    if device.type == "cuda":
        # K ranks share the GPU (--ranks-per-gpu): each has its share, as the plan prices it
        return torch.cuda.mem_get_info(device)[0] // placement.per_gpu()
    share = host.share_bytes(host.local_processes())
    return 1 << 62 if share is None else int(share)  # no /proc/meminfo: nothing to check


def memory_unfit(needed_bytes: float, device: torch.device, micro_batch: int) -> str | None:
    """Why a configuration estimated at `needed_bytes` will not fit now; None when it fits."""
    free = free_memory_bytes(device)
    if memory.fits(needed_bytes, free):
        return None
    return (
        f"out of memory at micro-batch {micro_batch}: estimate {needed_bytes / GIB:.1f} GiB, "
        f"{memory.with_margin(needed_bytes) / GIB:.1f} with the {memory.FIT_MARGIN:.0%} "
        f"margin, {free / GIB:.1f} GiB free"
    )
