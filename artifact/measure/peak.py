"""The matmul peak each GPU (or CPU) reaches in a precision: MFU's denominator, measured once."""

from __future__ import annotations

import functools
import statistics
import time

import torch

from artifact.measure.timing import timed
from artifact.workloads.precision import dtype_of, matmul_precision

WARMUP_S = 2.0  # seconds of products before timing
WINDOWS = 5  # timed windows of PRODUCTS products; the peak is the fastest window's median
PRODUCTS = 10


def window_s(a: torch.Tensor, b: torch.Tensor, device: torch.device) -> float:
    """Seconds of one product a @ b: the median of a window of PRODUCTS timed products."""
    return statistics.median(timed(lambda: a @ b, device) for _ in range(PRODUCTS))


@functools.cache
def peak_matmul_tflops(device: torch.device, precision: str, size: int | None = None) -> float:
    """Measured once a process and precision, so every configuration of a figure shares it.

    TFLOP/s of a square matmul (8192 on GPUs, 1024 on CPUs), random inputs: the median
    product of the fastest of WINDOWS windows, after WARMUP_S seconds of products."""
    n = size or (8192 if device.type == "cuda" else 1024)
    g = torch.Generator(device=device).manual_seed(0)
    a = torch.randn(n, n, device=device, dtype=dtype_of(precision), generator=g)
    b = torch.randn(n, n, device=device, dtype=dtype_of(precision), generator=g)
    with matmul_precision(precision):
        # Warm up by time, and take the best of several windows: a 1 s warm-up and one
        # window calibrated the peak far apart from process to process (docs/history.md,
        # "Facts behind the code's settings"). Products run back to back,
        # as training keeps the GPU busy, so the peak is the one under the power cap
        # (docs/measurement.md, MFU's denominator).
        start = time.perf_counter()
        while time.perf_counter() - start < WARMUP_S:
            timed(lambda: a @ b, device)
        fastest = min(window_s(a, b, device) for _ in range(WINDOWS))
    return 2 * n**3 / fastest / 1e12
