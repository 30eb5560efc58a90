"""Preflight: is this machine fit for the run it was asked for? Checked before anything is written.

Inside the Docker images (ARTIFACT_IMAGE is set) a GPU run that cannot see a GPU is a
mistake in the `docker run` line, not a request for the CPU check: without this check
`nox -s all` quietly ran the tiny CPU preset and exited 0. So there, no GPU is an error
naming the likely cause and its fix, unless `--preset tiny` (or `--device cpu`) asks for
the CPU check on purpose. Outside the images the pip path keeps its documented CPU
default and only says loudly that no GPU was seen.

Every decision is one line: an ArtifactError (exit 2) or a note printed before the run.
`decide` takes what was probed, so each decision is tested at its seam without a GPU.
Usage (noxfile.py does this first): python -m artifact.launch.preflight [run arguments...]
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from dataclasses import dataclass

from artifact.core.errors import ArtifactError
from artifact.core.units import size

# torch 2.13.0 from PyPI is a CUDA 13.0 build: CUDA 13.0 needs an R580 driver or newer.
MIN_NVIDIA_DRIVER = 580
# NCCL's shared-memory transport maps buffers per peer and channel in /dev/shm; Docker's
# default 64 MiB is exhausted with a few GPUs (ncclShmOpen errors, or a bus error). Half a
# GiB a GPU is a floor with room to spare; `--ipc=host` gives the host's /dev/shm.
SHM_PER_GPU = 512 << 20
DOCKER_FLAGS = "--ipc=host --ulimit memlock=-1 --ulimit stack=67108864"
GPU_FLAGS = {
    "cuda": "--gpus all",
    # the render group by number: its name may not exist inside the image
    "rocm": "--device=/dev/kfd --device=/dev/dri --group-add video "
    '--group-add "$(getent group render | cut -d: -f3)"',
}


# what PID 1 is under `docker run --init` (docker-init is tini) or a tini entrypoint
INITS = ("docker-init", "tini", "tini-static", "dumb-init", "init", "systemd")


@dataclass(frozen=True)
class Machine:
    """What preflight looks at, probed once (see probe())."""

    image: str | None  # ARTIFACT_IMAGE: 'overlap-artifact:cuda' or ':rocm', None outside
    gpus: int  # GPUs torch sees
    nvidia_driver: str | None  # from NVML; None where no NVIDIA driver is mounted
    kfd: str  # ROCm's /dev/kfd: 'ok', 'absent' or 'denied'
    shm_bytes: int | None  # size of /dev/shm; None if there is none
    pid1: str  # the command of PID 1 (nox there means no init process)
    # (amdsmi package, libamd_smi, ROCm release) on ROCm (device.amdsmi_versions); None
    # where amdsmi cannot load its library or on NVIDIA
    amdsmi: tuple[str, str, str | None] | None = None


def _numbers(version: str | None, n: int) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", version or "")[:n])


def amdsmi_agrees(module: str, library: str, rocm: str | None) -> bool:
    """Is the amdsmi Python package made for this libamd_smi? ROCm's own copy is numbered as
    its library; the package index's as the ROCm release it was made for."""
    if _numbers(module, 3) == _numbers(library, 3):
        return True
    return rocm is not None and _numbers(module, 2) == _numbers(rocm, 2)


def _image_kind(image: str | None) -> str | None:
    if not image:
        return None
    return "rocm" if image.endswith("rocm") else "cuda"


def _no_gpu_error(m: Machine, kind: str) -> ArtifactError:
    """The likely cause of seeing no GPU inside an image, and its fix, in one line."""
    cpu = "or pass `--preset tiny` for the CPU check on purpose"
    if kind == "rocm":
        if m.kfd == "absent":
            cause = "/dev/kfd is not in the container"
        elif m.kfd == "denied":
            cause = "/dev/kfd is there but not readable by this user (video/render group)"
        else:
            cause = "ROCm found no GPU (host amdgpu driver or device permissions)"
        return ArtifactError(
            f"no GPU visible in {m.image}: {cause}; run with `docker run {GPU_FLAGS['rocm']}`, {cpu}"
        )
    if m.nvidia_driver is None:
        cause = (
            "no NVIDIA driver is mounted into the container (missing `--gpus all`, "
            "or the NVIDIA Container Toolkit is not installed on the host)"
        )
    else:
        cause = f"the host driver {m.nvidia_driver} is mounted but CUDA sees no GPU"
    return ArtifactError(
        f"no GPU visible in {m.image}: {cause}; run with `docker run {GPU_FLAGS['cuda']}` "
        f"and a host driver >= {MIN_NVIDIA_DRIVER}, {cpu}"
    )


def decide(
    m: Machine, *, cpu_on_purpose: bool, gpus_wanted: int | None = None, preset: str | None = None
) -> list[str]:
    """Raise ArtifactError for a run that cannot go right; else return the notes to print.
    `preset`: the one asked for, if any (a GPU preset on a CPU is the run's own error)."""
    kind = _image_kind(m.image)
    notes = []
    if m.pid1 and m.pid1 not in INITS:
        # PID 1 ignores the SIGTERM it has no handler for: `docker stop` then SIGKILLs every
        # rank after 10 s, and fig9's power caps are not restored.
        notes.append(
            f"warning: {m.pid1} runs as PID 1: add `--init` to `docker run` so that "
            "`docker stop` reaches the ranks"
        )
    if cpu_on_purpose:
        if m.gpus == 0:
            notes.append(
                "CPU check on purpose: a functional check that evaluates no claim of the paper"
            )
        return notes
    if m.amdsmi is not None and not amdsmi_agrees(*m.amdsmi):
        # power readings and fig9's caps go through it: a binding made for another
        # library reads wrong fields or fails mid-run
        module, library, rocm = m.amdsmi
        raise ArtifactError(
            f"the amdsmi Python package {module} was not made for this libamd_smi {library} "
            f"(ROCm {rocm or 'unknown'}): install ROCm's own with "
            "`pip install --no-deps /opt/rocm/share/amd_smi`, or pass `--preset tiny`"
        )
    if m.nvidia_driver is not None and int(m.nvidia_driver.split(".")[0]) < MIN_NVIDIA_DRIVER:
        raise ArtifactError(
            f"host NVIDIA driver {m.nvidia_driver} is too old for CUDA 13 (torch 2.13.0): "
            f"needs {MIN_NVIDIA_DRIVER} or newer; update the host driver, or pass `--preset tiny`"
        )
    if m.gpus == 0:
        if kind is not None:
            raise _no_gpu_error(m, kind)
        if preset is None:  # the run falls back to tiny; an asked-for preset errors there
            notes.append(
                "WARNING: no GPU seen: running the tiny CPU preset, a functional check that "
                "evaluates no claim of the paper (the paper's runs need GPUs)"
            )
        return notes
    used = min(gpus_wanted or m.gpus, m.gpus)
    if used > 1 and m.shm_bytes is not None and m.shm_bytes < used * SHM_PER_GPU:
        where = " (add `--ipc=host`, or `--shm-size=16g`, to `docker run`)" if kind else ""
        raise ArtifactError(
            f"/dev/shm is {size(m.shm_bytes)}, too small for NCCL with {used} GPUs "
            f"(needs {size(used * SHM_PER_GPU)} or more){where}"
        )
    return notes


def _nvidia_driver() -> str | None:
    """The NVIDIA driver's version through the one device layer; None without a driver."""
    from artifact.measure import device

    return device.driver_version("nvml")


def _kfd() -> str:
    if not os.path.exists("/dev/kfd"):
        return "absent"
    return "ok" if os.access("/dev/kfd", os.R_OK | os.W_OK) else "denied"


def _shm_bytes() -> int | None:
    try:
        st = os.statvfs("/dev/shm")
    except OSError:
        return None
    return st.f_frsize * st.f_blocks


def _pid1() -> str:
    try:
        with open("/proc/1/cmdline", "rb") as f:
            argv = f.read().split(b"\0")
    except OSError:
        return ""
    # `python /usr/bin/nox ...` or `nox ...`: name the program, not the interpreter
    names = [os.path.basename(a.decode(errors="replace")) for a in argv if a]
    return next((n for n in names if n == "nox"), names[0] if names else "")


def _amdsmi() -> tuple[str, str, str | None] | None:
    from artifact.measure import device

    return device.amdsmi_versions()


def probe() -> Machine:
    import torch  # here, not at import: the tests exercise decide() without it

    image = os.environ.get("ARTIFACT_IMAGE") or None
    kind = _image_kind(image) or ("rocm" if torch.version.hip else "cuda")
    return Machine(
        image=image,
        gpus=torch.cuda.device_count() if torch.cuda.is_available() else 0,
        nvidia_driver=_nvidia_driver() if kind == "cuda" else None,
        kfd=_kfd(),
        shm_bytes=_shm_bytes(),
        pid1=_pid1() if image else "",
        amdsmi=_amdsmi() if kind == "rocm" else None,
    )


def main(argv: list[str] | None = None, machine: Machine | None = None) -> int:
    """Check the run that `python -m artifact run FIG ARGS` would start; exit 2 if it cannot go right."""
    p = argparse.ArgumentParser(prog="python -m artifact.launch.preflight", add_help=False)
    p.add_argument("--preset")
    p.add_argument("--device")
    p.add_argument("--gpus", type=int)
    args, _ = p.parse_known_args(argv)
    if {"-h", "--help"} & set(argv or ()):  # nothing will run: nothing to warn of
        return 0
    cpu = args.preset == "tiny" or args.device == "cpu"
    try:
        notes = decide(
            machine or probe(), cpu_on_purpose=cpu, gpus_wanted=args.gpus, preset=args.preset
        )
    except ArtifactError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for note in notes:
        print(note, file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
