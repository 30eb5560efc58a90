"""The matmul peak each GPU (or CPU) reaches in a precision: MFU's denominator, measured once."""

from __future__ import annotations

import statistics

import torch

from artifact.measure.timing import timed
from artifact.precision import dtype_of, matmul_precision


def peak_matmul_tflops(device: torch.device, precision: str, size: int | None = None) -> float:
    """Median TFLOP/s of a square matmul (8192 on GPUs, 1024 on CPUs), random inputs."""
    n = size or (8192 if device.type == "cuda" else 1024)
    g = torch.Generator(device=device).manual_seed(0)
    a = torch.randn(n, n, device=device, dtype=dtype_of(precision), generator=g)
    b = torch.randn(n, n, device=device, dtype=dtype_of(precision), generator=g)
    with matmul_precision(precision):
        for _ in range(3):
            a @ b
        times = [timed(lambda: a @ b, device) for _ in range(10)]
    return 2 * n**3 / statistics.median(times) / 1e12
