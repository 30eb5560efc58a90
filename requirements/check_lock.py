"""Does every CUDA package in lock-cuda.txt run on the oldest driver the CUDA image accepts?

    python requirements/check_lock.py [requirements/lock-cuda.txt]

The image brings CUDA as PyPI packages and takes only the driver from the host. The oldest
driver it accepts is preflight's MIN_NVIDIA_DRIVER (R580), whose CUDA is 13.0. A package
built for a newer CUDA than that may need a newer driver, so each package in the lock is
placed by what its name and version say:

- `nvidia-*-cuNN` (cuDNN, NCCL, NVSHMEM, cuSPARSELt): built for CUDA major NN, every minor
  of it. NN newer than the driver's major fails.
- CUDA-numbered packages (CUDA_NUMBERED: cuda-toolkit, the runtime, NVRTC, CUPTI, NVTX,
  nvJitLink, cuda-bindings, ...): their version's major.minor is the CUDA release. A newer
  major fails. A newer minor of the driver's major would run only under CUDA's minor-version
  compatibility, which covers the runtime but not what needs the newer driver itself (the
  driver JIT-compiling newer PTX, newer driver functions): such a package fails unless
  NEWER_MINOR_OK says why it needs nothing of a newer driver. So a newer CUDA minor entering
  the lock is a decision (allow it, or raise MIN_NVIDIA_DRIVER), not an accident.
- Library-numbered packages (cuBLAS 13.1, cuFFT 12.0, cuRAND 10.4, ...): their version
  numbers the library, not CUDA. They are of the CUDA release of the cuda-toolkit
  metapackage that pins them exactly (cuda-toolkit 13.0.3.0 pins nvidia-cublas==13.1.1.3.*
  and the rest), so they must be in the lock `via cuda-toolkit`, whose own version is
  checked above.
- NOT_CUDA: pure bindings or finders with no CUDA code of their own.
Any other nvidia-* or cuda-* package fails as unknown: say here what it is.
Exit status: 0 when every package fits, 1 naming each that does not, 2 for a bad argument.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOCK = ROOT / "requirements" / "lock-cuda.txt"
# NVIDIA's CUDA toolkit/driver table: the CUDA version each driver branch ships.
DRIVER_CUDA = {580: (13, 0)}
CUDA_NUMBERED = {
    "cuda-toolkit",
    "cuda-bindings",
    "nvidia-cuda-runtime",
    "nvidia-cuda-nvrtc",
    "nvidia-cuda-cupti",
    "nvidia-cuda-nvcc",
    "nvidia-cuda-cccl",
    "nvidia-cuda-crt",
    "nvidia-cuda-culibos",
    "nvidia-cuda-cuxxfilt",
    "nvidia-cuda-opencl",
    "nvidia-cuda-profiler-api",
    "nvidia-cuda-sanitizer-api",
    "nvidia-nvtx",
    "nvidia-nvjitlink",
    "nvidia-nvvm",
    "nvidia-nvptxcompiler",
    "nvidia-nvfatbin",
    "nvidia-nvml-dev",
}
NEWER_MINOR_OK = {
    # cuda-toolkit 13.0.3.0 itself asks for nvidia-nvjitlink>=13.0.88,<14.
    "nvidia-nvjitlink": "it links device code into SASS itself (cuFFT's, cuSPARSE's and "
    "cuSOLVER's link-time-optimised kernels), and SASS needs no newer driver; only PTX output, "
    "which the driver would JIT-compile, would, and those libraries do not ask for it",
    # torch 2.13.0 asks for cuda-bindings>=13.0.3,<14.
    "cuda-bindings": "it looks driver functions up at run time (cuGetProcAddress): one newer "
    "than the driver fails when called, not at import, and older ones work",
}
NOT_CUDA = {
    "nvidia-ml-py": "NVML's Python binding: it asks the host driver's libnvidia-ml at run time",
    "cuda-pathfinder": "pure Python: finds CUDA libraries on disk",
}
SUFFIX = re.compile(r"-cu(\d+)$")


@dataclass(frozen=True)
class Locked:
    name: str
    version: str
    via: frozenset[str]  # what the lock says brought it in (`# via ...`)


def parse_lock(text: str) -> list[Locked]:
    """Every `name==version` entry of a uv-compiled lock, with its `# via` packages."""
    out = []
    for entry in re.split(r"\n(?=[A-Za-z0-9])", text):
        m = re.match(r"([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)", entry)
        if not m:
            continue
        via_text = entry.split("# via", 1)[1] if "# via" in entry else ""
        via = {w for w in re.findall(r"[A-Za-z0-9][A-Za-z0-9._-]*", via_text)}
        name = re.sub(r"[-_.]+", "-", m.group(1)).lower()
        out.append(Locked(name, m.group(2), frozenset(via)))
    return out


def _major_minor(version: str) -> tuple[int, int]:
    major, minor = (int(x) for x in re.findall(r"\d+", version)[:2])
    return major, minor


def problems(packages: list[Locked], driver_cuda: tuple[int, int]) -> list[str]:
    """One line per CUDA package that needs a newer CUDA than `driver_cuda`, or is unknown."""
    cuda = "CUDA {}.{}".format(*driver_cuda)
    out = []
    for p in packages:
        if not p.name.startswith(("nvidia-", "cuda-")) or p.name in NOT_CUDA:
            continue
        suffix = SUFFIX.search(p.name)
        if suffix:
            if int(suffix.group(1)) > driver_cuda[0]:
                out.append(
                    f"{p.name}=={p.version} is built for CUDA {suffix.group(1)}, newer than {cuda}"
                )
        elif p.name in CUDA_NUMBERED:
            need = _major_minor(p.version)
            if need[0] > driver_cuda[0] or (need > driver_cuda and p.name not in NEWER_MINOR_OK):
                out.append(
                    f"{p.name}=={p.version} needs CUDA {need[0]}.{need[1]}, newer than {cuda}"
                )
        elif "cuda-toolkit" not in p.via:
            out.append(
                f"{p.name}=={p.version}: cannot tell which CUDA it needs (not pinned by "
                "cuda-toolkit, no -cuNN suffix, not in check_lock.py's lists)"
            )
    return out


def min_driver() -> int:
    """preflight's MIN_NVIDIA_DRIVER, read from its source (one place says it)."""
    text = (ROOT / "artifact" / "launch" / "preflight.py").read_text()
    return int(re.search(r"^MIN_NVIDIA_DRIVER = (\d+)", text, re.M).group(1))


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    lock = Path(args[0]) if args else LOCK
    if len(args) > 1 or not lock.is_file():
        print(f"usage: check_lock.py [LOCK]; {lock} is not a file", file=sys.stderr)
        return 2
    driver = min_driver()
    if driver not in DRIVER_CUDA:
        print(
            f"MIN_NVIDIA_DRIVER {driver} is not in DRIVER_CUDA ({sorted(DRIVER_CUDA)}): "
            "add the CUDA version it ships",
            file=sys.stderr,
        )
        return 2
    packages = parse_lock(lock.read_text())
    found = problems(packages, DRIVER_CUDA[driver])
    for line in found:
        print(f"{lock.name}: {line}", file=sys.stderr)
    if found:
        return 1
    cuda = [
        p for p in packages if p.name.startswith(("nvidia-", "cuda-")) and p.name not in NOT_CUDA
    ]
    newer = sorted(
        p.name
        for p in cuda
        if p.name in NEWER_MINOR_OK and _major_minor(p.version) > DRIVER_CUDA[driver]
    )
    print(
        f"{lock.name}: {len(cuda)} CUDA packages run on driver R{driver} (CUDA "
        "{}.{}); newer minor allowed: {}".format(*DRIVER_CUDA[driver], ", ".join(newer) or "none")
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
