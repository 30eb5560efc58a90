"""`--ranks-per-gpu K`: K ranks, each a process of its own, share each GPU.

It rehearses a K-times-larger world on the GPUs present (`nox -s rehearsal`: W = 4 on one
GPU): local rank r takes GPU r // K. NCCL 2.30 and later let several ranks use one GPU
(NCCL_MULTI_RANK_GPU_ENABLE=1); NVLink SHARP (NVLS) needs one rank a GPU, so it is off.
Processes on one GPU take turns on it (time-slicing) unless an MPS daemon serves them
(artifact.rank.mps). Nothing here changes a GPU's settings. Torch-free: the CLI checks the
flag before torch loads; only the NCCL version check imports it.
"""

from __future__ import annotations

import os

from artifact.core.errors import ArtifactError

ENV = "ARTIFACT_RANKS_PER_GPU"  # the ranks' word on K (the worker maps its device by it)
NCCL_ENV = {"NCCL_MULTI_RANK_GPU_ENABLE": "1", "NCCL_NVLS_ENABLE": "0"}
# the NCCL that lets several ranks use one GPU (--ranks-per-gpu here, --colocate in
# artifact.rank.colocate), and the wheel that brings it
MIN_NCCL = (2, 30)
NCCL_WHEEL = "nvidia-nccl-cu13==2.32.3"


def check(per_gpu: int | None, device: str, emulate_world: object = None) -> None:
    """Refuse what K > 1 cannot mean here, in one line, before torch loads."""
    if not per_gpu or per_gpu == 1:
        return
    if device == "cpu":
        raise ArtifactError(
            f"--ranks-per-gpu {per_gpu} shares each GPU among {per_gpu} ranks, and this run is "
            "on the CPU (no GPU here); CPU runs take --nproc N (gloo processes)"
        )
    if emulate_world:
        raise ArtifactError(
            f"--ranks-per-gpu {per_gpu} with --emulate-world: emulation runs one process; "
            "accepted: one of the two"
        )


def check_nccl(per_gpu: int, version: tuple[int, ...] | None = None) -> None:
    """The loaded NCCL must be 2.30 or newer (several ranks on one GPU)."""
    if version is None:
        from artifact.env import nccl_loaded

        version = nccl_loaded()
    if why := nccl_refusal(version):
        raise ArtifactError(f"--ranks-per-gpu {per_gpu}: {why}")


def nccl_refusal(version: tuple[int, ...]) -> str | None:
    """Why co-located NCCL ranks cannot run with NCCL `version` (one line), or None where
    they can."""
    if tuple(version[:2]) >= MIN_NCCL:
        return None
    have = ".".join(str(v) for v in version)
    return (
        f"co-located NCCL ranks need NCCL {MIN_NCCL[0]}.{MIN_NCCL[1]} or newer "
        f"(NCCL_MULTI_RANK_GPU_ENABLE); this torch loads NCCL {have}; install "
        f"`pip install --no-deps {NCCL_WHEEL}` into the environment (torch pins an older one)"
    )


def layout(world: int, per_gpu: int, gpus_present: int) -> int:
    """The GPUs a world of `world` ranks takes at `per_gpu` ranks a GPU; refused where
    K does not divide the world or the GPUs are too few."""
    if per_gpu < 1 or world % per_gpu:
        divisors = ", ".join(str(k) for k in range(1, world + 1) if world % k == 0)
        raise ArtifactError(
            f"--ranks-per-gpu {per_gpu} does not divide the world of {world} ranks; "
            f"accepted: {divisors}"
        )
    gpus = world // per_gpu
    if gpus > gpus_present:
        least = -(-world // max(gpus_present, 1))
        raise ArtifactError(
            f"--ranks-per-gpu {per_gpu} puts {world} ranks on {gpus} GPUs, and this machine "
            f"has {gpus_present}; accepted: {least} or more, dividing {world}"
        )
    return gpus


def rank_env(per_gpu: int) -> dict[str, str]:
    """What the ranks' environment needs for K ranks a GPU (nothing for one)."""
    return {} if per_gpu == 1 else {ENV: str(per_gpu), **NCCL_ENV}


def per_gpu(environ: dict[str, str] | None = None) -> int:
    """K, as the CLI told the ranks (1 when it said nothing)."""
    return int((environ if environ is not None else os.environ).get(ENV, "1"))


def device_index(local_rank: int, per_gpu: int) -> int:
    """The GPU (its index among the visible ones) that local rank `local_rank` takes."""
    return local_rank // per_gpu
