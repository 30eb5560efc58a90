"""Device-synchronised wall-clock timing of an iteration.

The host clock is read after synchronising the whole device, so work on every stream
(compute and communication side streams alike) is inside the measured time. That is
what E2E means here; CUDA events on one stream would miss side-stream work.
"""

from __future__ import annotations

import contextlib
import gc
import time
from collections.abc import Callable, Iterator

import torch

# Every device-wide synchronisation the artifact makes, counted: the seam a test reads to
# show that a mode's step makes none of its own (the timer's two are the measurement).
SYNC_CALLS = [0]


def synchronize(device: torch.device) -> None:
    SYNC_CALLS[0] += 1
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(fn: Callable[[], object], device: torch.device) -> float:
    """Seconds that fn's device work takes, from an idle device to an idle device."""
    synchronize(device)
    t0 = time.perf_counter()
    fn()
    synchronize(device)
    return time.perf_counter() - t0


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Python's garbage collector paused over timed iterations, as torchtitan and
    Megatron-LM pause it in their training loops: a collection of a large heap (ZeRO-3's
    hooks and parameters) stalls the host for tens of milliseconds at moments no phase
    chooses. One full collection runs first, outside the timing."""
    gc.collect()
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
