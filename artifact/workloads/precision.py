"""Precision names -> torch dtypes and the TF32 switch (FP32 with and without tensor cores)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

from artifact.core.config import check_precision

_DTYPES = {
    "fp32": torch.float32,
    "tf32": torch.float32,
    "fp16": torch.float16,
    "bf16": torch.bfloat16,
}


def dtype_of(precision: str) -> torch.dtype:
    return _DTYPES[check_precision(precision)]


@contextlib.contextmanager
def matmul_precision(precision: str) -> Iterator[None]:
    """TF32 tensor cores on for 'tf32', off otherwise (so 'fp32' is true FP32)."""
    check_precision(precision)
    saved = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    tf32 = precision == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved
