"""Why MFU's denominator moves: the matmul peak window by window, with the GPU's state.

artifact.measure.peak calibrates the FP16 matmul peak once a process. On one H200 that
came out anywhere from 522 to 756 TFLOP/s from process to process. This probe runs the
same 8192^3 products for a while and prints, per window of PRODUCTS products, the
TFLOP/s (median product) beside what NVML reads just after it: SM clock, power and
temperature (read-only; nothing on the GPU is changed). Random inputs, then zeros
(a tensor core's power depends on the data it multiplies), then the calibration itself.
Prints one JSON object.

    python benchmarks/peak_probe.py --seconds 10
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from artifact.measure import device as gpu  # noqa: E402
from artifact.measure.peak import PRODUCTS, peak_matmul_tflops  # noqa: E402
from artifact.measure.timing import timed  # noqa: E402
from artifact.precision import dtype_of  # noqa: E402


def windows(a: torch.Tensor, b: torch.Tensor, seconds: float, nvml) -> list[dict]:
    """Windows of PRODUCTS timed products for `seconds`, each with NVML's readings."""
    n = a.shape[0]
    rows, start = [], time.perf_counter()
    while time.perf_counter() - start < seconds:
        t = statistics.median(timed(lambda: a @ b, a.device) for _ in range(PRODUCTS))
        reading = dict(zip(gpu.FIELDS, nvml.read(), strict=True))
        nv = nvml._nv  # pynvml: newer releases renamed the call
        reasons = getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None)
        reasons = reasons or nv.nvmlDeviceGetCurrentClocksThrottleReasons
        rows.append(
            {
                "t_s": round(time.perf_counter() - start, 2),
                "tflops": round(2 * n**3 / t / 1e12, 1),
                "sm_clock_mhz": reading["sm_clock_mhz"],
                "power_w": reading["power_instant_w"],
                "temp_c": reading["temp_c"],
                # NVML's bitmask of why the clock is below its maximum (0x4: power cap,
                # 0x20/0x40: thermal slowdown, 0x1: idle)
                "clock_reasons": hex(reasons(nvml._h)),
            }
        )
    return rows


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=10.0, help="of random products")
    p.add_argument("--precision", default="fp16")
    p.add_argument("--size", type=int, default=8192)
    args = p.parse_args()
    if not torch.cuda.is_available():
        print("error: needs a GPU", file=sys.stderr)
        return 2
    dev = torch.device("cuda", 0)
    nvml = gpu.open_gpu(0, gpu.GPU_BACKENDS)
    idle = dict(zip(gpu.FIELDS, nvml.read(), strict=True))
    n, dtype = args.size, dtype_of(args.precision)
    g = torch.Generator(device=dev).manual_seed(0)
    a = torch.randn(n, n, device=dev, dtype=dtype, generator=g)
    b = torch.randn(n, n, device=dev, dtype=dtype, generator=g)
    random_rows = windows(a, b, args.seconds, nvml)
    zero_rows = windows(torch.zeros_like(a), torch.zeros_like(b), args.seconds / 2, nvml)
    calibrated = peak_matmul_tflops(dev, args.precision, n)
    out = {
        "precision": args.precision,
        "size": n,
        "idle": idle,
        "power_limit_w": nvml.power_limit_w(),
        "random": random_rows,
        "zeros": zero_rows,
        "calibration_after": calibrated,
    }
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
