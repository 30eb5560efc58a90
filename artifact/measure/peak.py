"""The matmul peak each GPU (or CPU) reaches in a precision: MFU's denominator, measured once."""

from __future__ import annotations

import functools
import statistics
import time

import torch

from artifact.measure.timing import timed
from artifact.precision import dtype_of, matmul_precision

WARMUP_S = 1.0  # seconds of products before timing


@functools.cache
def peak_matmul_tflops(device: torch.device, precision: str, size: int | None = None) -> float:
    """Measured once a process and precision, so every configuration of a figure shares it.

    Median TFLOP/s of a square matmul (8192 on GPUs, 1024 on CPUs), random inputs."""
    n = size or (8192 if device.type == "cuda" else 1024)
    g = torch.Generator(device=device).manual_seed(0)
    a = torch.randn(n, n, device=device, dtype=dtype_of(precision), generator=g)
    b = torch.randn(n, n, device=device, dtype=dtype_of(precision), generator=g)
    with matmul_precision(precision):
        # Warm up by time, not by count: after three products one H200 once calibrated
        # FP16 at 544 TFLOP/s where every other calibration gave 740-756, which moved the
        # same pipeline's MFU from 0.55 to 0.76 (its E2E unchanged). Cause not
        # established (clock ramp after a teardown is the likeliest); this warm-up is not
        # yet measured on a GPU.
        start = time.perf_counter()
        while time.perf_counter() - start < WARMUP_S:
            timed(lambda: a @ b, device)
        times = [timed(lambda: a @ b, device) for _ in range(10)]
    return 2 * n**3 / statistics.median(times) / 1e12
