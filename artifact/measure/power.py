"""GPU power telemetry: a background sampler over the device layer (NVML, AMD-SMI or none).

What is read (docs/design.md section 3, "Power"):
- power: NVML's nvmlDeviceGetPowerUsage (a ~1 s running average on parts other than
  A100, per NVIDIA's documentation) and, where the field exists, the instant reading
  NVML_FI_DEV_POWER_INSTANT, from which peaks are taken; AMD-SMI's socket power;
- energy: the cumulative energy counter. The energy of a phase is the counter's
  difference across it, never an integral of coarse power samples;
- SM clock and temperature.
Every reading refreshes far more slowly than it can be polled (about every 100 ms for
each NVML field on an H200, measured with benchmarks/nvml_probe.py), so the sampler
measures the *effective* resolution at run time: the median interval between changes
of each field. Records and the report carry it next to every power number.

Sample times are epoch nanoseconds (time.time_ns), the clock torch.profiler traces
are based on (`baseTimeNanoseconds` + ts), so samples can be laid on the kernel
timeline (artifact.measure.telemetry.label_samples).

Callers measure through `PowerMonitor`'s two verbs, as Zeus's ZeusMonitor:
`begin_window(name)`, then `end_window(name)` returns the window's Measurement; what the
samples say beyond one window (intervals, kernel states) is artifact.measure.telemetry.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import pandas as pd

from artifact.core.errors import bad_choice
from artifact.measure import device
from artifact.measure.telemetry import WindowPower, window_power

log = logging.getLogger(__name__)

BACKENDS = ("auto", "nvml", "amdsmi", "none")
FIELDS = device.FIELDS
DEFAULT_INTERVAL_S = 0.020


class Backend(Protocol):
    """What the sampler reads: a `device` class, or a fake in tests."""

    name: str

    def read(self) -> tuple[float, ...]:
        """One value per FIELDS entry (NaN where the device has none)."""

    def power_limit_w(self) -> float:
        """The enforced power limit (the TDP the paper normalises by)."""

    def limit_range_w(self) -> tuple[float, float]: ...

    def close(self) -> None: ...


NoneBackend = device.NoDevice  # no telemetry: every reading NaN


def open_backend(name: str = "auto", index: int = 0) -> Backend:
    """The named backend, or for 'auto' the first that works: NVML, AMD-SMI, none."""
    if name not in BACKENDS:
        raise bad_choice("power backend", name, BACKENDS)
    if name == "none":
        return NoneBackend()
    try:
        return device.open_gpu(index, device.GPU_BACKENDS if name == "auto" else (name,))
    except device.Unavailable as e:
        log.info("no power telemetry (%s)", e)
        return NoneBackend()


@dataclass
class PowerSampler:
    """Polls a backend every `interval_s` on a thread; use as a context manager."""

    backend: Backend
    interval_s: float = DEFAULT_INTERVAL_S
    _rows: list[tuple] = field(default_factory=list, init=False)
    _stop: threading.Event = field(default_factory=threading.Event, init=False)
    _thread: threading.Thread | None = field(default=None, init=False)

    def _loop(self) -> None:
        next_t = time.perf_counter()
        while not self._stop.is_set():
            self._rows.append((time.time_ns(), *self.backend.read()))
            next_t += self.interval_s
            self._stop.wait(max(0.0, next_t - time.perf_counter()))

    def __enter__(self) -> PowerSampler:
        self._rows.clear()
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="power-sampler", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._rows.append((time.time_ns(), *self.backend.read()))  # a closing reading

    def samples(self) -> pd.DataFrame:
        """Columns t_ns (epoch ns) and FIELDS, one row a poll."""
        rows = list(self._rows)  # a snapshot: the thread may still be appending
        return pd.DataFrame(rows, columns=["t_ns", *FIELDS])


@dataclass(frozen=True)
class Measurement:
    """What `end_window` returns: the window's power (the energy counter's difference
    over its samples, peaks, clock), the samples it holds, and when it began and ended
    (epoch ns), for analyses that split it (artifact.measure.telemetry)."""

    power: WindowPower
    samples: pd.DataFrame
    start_ns: int
    end_ns: int


class PowerMonitor:
    """Power windows with two verbs, as Zeus's ZeusMonitor: `begin_window(name)` opens a
    window, `end_window(name)` closes it and returns its Measurement: the samples polled
    between the two. Windows may nest and overlap (Fig. 7: the whole trace, and each
    block within it). One sampler polls while any window is open: the first window
    starts it and the last one's end stops it, its closing reading included. Without
    telemetry (the none backend) nothing is polled and `end_window` returns None.

    As a context manager it stops the sampler on the way out, whatever is still open (an
    exception inside a window leaves no thread polling). `sampler` and `clock` are seams
    for tests: what polls the backend, and the epoch-ns clock the windows are stamped by.
    """

    def __init__(
        self,
        backend: Backend,
        interval_s: float = DEFAULT_INTERVAL_S,
        *,
        sampler: Callable[[Backend, float], PowerSampler] = PowerSampler,
        clock: Callable[[], int] = time.time_ns,
    ):
        self.backend, self.interval_s = backend, interval_s
        self._make, self._clock = sampler, clock
        self._open: dict[str, int] = {}
        self._sampler: PowerSampler | None = None

    @property
    def telemetry(self) -> bool:
        return self.backend.name != "none"

    def begin_window(self, name: str) -> None:
        if name in self._open:
            raise ValueError(f"power window {name!r} is open already")
        self._open[name] = self._clock()
        if self.telemetry and self._sampler is None:
            self._sampler = self._make(self.backend, self.interval_s)
            self._sampler.__enter__()

    def end_window(self, name: str) -> Measurement | None:
        if name not in self._open:
            opened = ", ".join(self._open) or "none"
            raise ValueError(f"power window {name!r} was not begun; open: {opened}")
        start = self._open.pop(name)
        if self._sampler is None:
            return None
        sampler = self._sampler
        if not self._open:  # the last window: its closing reading is inside it
            self._stop()
        end = self._clock()
        samples = sampler.samples()
        inside = samples[(samples["t_ns"] >= start) & (samples["t_ns"] <= end)]
        return Measurement(window_power(inside), inside, start, end)

    def _stop(self) -> None:
        if self._sampler is not None:
            self._sampler.__exit__(None, None, None)
            self._sampler = None

    def __enter__(self) -> PowerMonitor:
        return self

    def __exit__(self, *exc) -> None:
        self._stop()
        self._open.clear()
