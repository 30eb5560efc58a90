"""Why MFU's denominator moves: the matmul peak window by window, with the GPU's state.

artifact.measure.peak calibrates the FP16 matmul peak once a process. On one H200 that
came out anywhere from 522 to 756 TFLOP/s from process to process. This probe runs the
same 8192^3 products for a while and prints, per window of PRODUCTS products, the
TFLOP/s (median product) beside what NVML reads just after it: SM clock, power and
temperature (read-only; nothing on the GPU is changed). Random inputs with a pause for
NVML after each window, back to back (NVML read by a thread), with pauses again; then
zeros (a tensor core's power depends on the data it multiplies), then the calibration
itself. Prints one JSON object.

    python benchmarks/peak_probe.py --seconds 6
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from artifact.measure import device as gpu  # noqa: E402
from artifact.measure import power  # noqa: E402
from artifact.measure.peak import peak_matmul_tflops, window_s  # noqa: E402
from artifact.workloads.precision import dtype_of  # noqa: E402


def windows(a: torch.Tensor, b: torch.Tensor, seconds: float, nvml, pause: bool) -> list[dict]:
    """Windows of PRODUCTS timed products for `seconds`. With `pause`, NVML is read after
    each window on this thread (the GPU idles meanwhile, about 2 ms); without, the
    products run back to back, as in artifact.measure.peak, and a PowerSampler thread
    reads NVML (its per-window median is given)."""
    n = a.shape[0]
    rows, start = [], time.perf_counter()
    sampler = power.PowerSampler(nvml) if not pause else None
    with sampler or contextlib.nullcontext():
        while time.perf_counter() - start < seconds:
            t0 = time.time_ns()
            t = window_s(a, b, a.device)
            row = {
                "t_s": round(time.perf_counter() - start, 2),
                "tflops": round(2 * n**3 / t / 1e12, 1),
            }
            if pause:
                row |= _reading(nvml)
            else:
                row["t0_ns"], row["t1_ns"] = t0, time.time_ns()
            rows.append(row)
    if sampler is not None:  # the sampler's readings within each window
        samples = sampler.samples()
        for row in rows:
            inside = samples[
                (samples.t_ns >= row.pop("t0_ns")) & (samples.t_ns <= row.pop("t1_ns"))
            ]
            row["sm_clock_mhz"] = float(inside.sm_clock_mhz.median()) if len(inside) else None
            row["power_w"] = float(inside.power_instant_w.median()) if len(inside) else None
    return rows


def _reading(nvml) -> dict:
    reading = dict(zip(gpu.FIELDS, nvml.read(), strict=True))
    return {
        "sm_clock_mhz": reading["sm_clock_mhz"],
        "power_w": reading["power_instant_w"],
        "temp_c": reading["temp_c"],
        "clock_reasons": hex(_clock_reasons()),
    }


@functools.cache
def _reasons_call():
    """NVML's bitmask of why the SM clock is below its maximum (0x4: power cap,
    0x20/0x40: thermal slowdown, 0x1: idle), for GPU 0. Asked of pynvml directly: the
    artifact's device layer records power, energy, clock and temperature, not reasons."""
    import pynvml

    pynvml.nvmlInit()
    handle = pynvml.nvmlDeviceGetHandleByIndex(0)
    # newer pynvml releases renamed the call
    call = getattr(pynvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
    call = call or pynvml.nvmlDeviceGetCurrentClocksThrottleReasons
    return functools.partial(call, handle)


def _clock_reasons() -> int:
    return _reasons_call()()


def _per_second(rows: list[dict]) -> list[dict]:
    """Median TFLOP/s and clock of each second's windows (the rows are kept too)."""
    out = []
    for second in sorted({int(r["t_s"]) for r in rows}):
        rs = [r for r in rows if int(r["t_s"]) == second]
        clocks = [r["sm_clock_mhz"] for r in rs if r.get("sm_clock_mhz") is not None]
        out.append(
            {
                "second": second,
                "windows": len(rs),
                "tflops_median": statistics.median(r["tflops"] for r in rs),
                "tflops_max": max(r["tflops"] for r in rs),
                "sm_clock_mhz_median": statistics.median(clocks) if clocks else None,
            }
        )
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=6.0, help="of each random phase")
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
    zeros = torch.zeros_like(a), torch.zeros_like(b)
    # A, B, A: paused windows, back to back, paused again, so an order effect (the GPU
    # warming up) cannot pass for the effect of the pauses; then zeros (paused)
    phases = {}
    for name, (x, y), seconds, pause in (
        ("random_paused", (a, b), args.seconds, True),
        ("random_back_to_back", (a, b), args.seconds, False),
        ("random_paused_again", (a, b), args.seconds, True),
        ("zeros_paused", zeros, args.seconds / 2, True),
    ):
        rows = windows(x, y, seconds, nvml, pause)
        phases[name] = {"per_second": _per_second(rows), "windows": rows}
    calibrated = peak_matmul_tflops(dev, args.precision, n)
    out = {
        "precision": args.precision,
        "size": n,
        "idle": idle,
        "power_limit_w": nvml.power_limit_w(),
        **phases,
        "calibration_after": calibrated,
    }
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
