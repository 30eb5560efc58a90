"""Device-synchronised wall-clock timing of an iteration.

`timed` reads the host clock after synchronising the whole device, so work on every
stream is inside the measured time (settling, training's rounds). `SpanTimer` marks
spans on the current stream instead (CUDA events), for iterations queued back to back
(the microbenchmark's timed pass) and the compute units within them; a marked step
joins its side streams before it returns, so their work is inside its marks.
"""

from __future__ import annotations

import contextlib
import gc
import time
from collections.abc import Callable, Iterator

import torch

# The host clock every timing reads (seconds): the seam tests replace with a fake that
# their steps advance, so timing logic is tested without sleeping on a busy machine
_CLOCK: list[Callable[[], float]] = [time.perf_counter]


def clock() -> float:
    return _CLOCK[0]()


@contextlib.contextmanager
def clock_from(fake: Callable[[], float]) -> Iterator[None]:
    """Every timing reads `fake` inside the block (the tests' seam)."""
    saved, _CLOCK[0] = _CLOCK[0], fake
    try:
        yield
    finally:
        _CLOCK[0] = saved


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
    t0 = clock()
    fn()
    synchronize(device)
    return clock() - t0


def spin_cycles_per_s(device: torch.device) -> float:
    """Clock cycles of torch.cuda._sleep (a one-thread spinning kernel) a second, timed on
    this GPU now (the fastest of three 1M-cycle spins)."""
    cycles = 1_000_000
    torch.cuda._sleep(cycles)  # warm-up
    return cycles / min(timed(lambda: torch.cuda._sleep(cycles), device) for _ in range(3))


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


class SpanTimer:
    """Time of marked spans of device work, summed per iteration, while begun: CUDA
    events on the current stream on a GPU (read once, at `end`), the host clock on a CPU
    (where the work is synchronous). A meter of the timed pass (runner.timed_pass): it
    times the whole pass, not the profiler's few iterations, and adds no synchronisation.
    """

    def __init__(self, device: torch.device, name: str):
        self.device, self.name = device, name
        self._iterations: list[list] | None = None  # None: not begun, spans not timed

    def begin(self) -> None:
        self._iterations = []

    def next_iteration(self) -> None:
        if self._iterations is not None:
            self._iterations.append([])

    @contextlib.contextmanager
    def span(self) -> Iterator[None]:
        if self._iterations is None:
            yield
            return
        if self.device.type == "cuda":
            start, stop = (torch.cuda.Event(enable_timing=True) for _ in range(2))
            start.record()
            yield
            stop.record()
            self._iterations[-1].append((start, stop))
        else:
            t0 = clock()
            yield
            self._iterations[-1].append((clock() - t0) * 1e3)

    def end(self) -> dict[str, list[float]]:
        """Each iteration's summed spans in ms, under the timer's name; stops timing."""
        iterations, self._iterations = self._iterations or [], None
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)  # after the pass: the events are done
            iterations = [[a.elapsed_time(b) for a, b in spans] for spans in iterations]
        return {self.name: [float(sum(spans)) for spans in iterations]}
