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
timeline (`label_samples`).
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import pandas as pd

from artifact.core.errors import bad_choice
from artifact.measure import device
from artifact.measure.kernels import intersect, intersection_length, merge_intervals

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
        return pd.DataFrame(self._rows, columns=["t_ns", *FIELDS])


def effective_resolution_s(samples: pd.DataFrame, column: str) -> float:
    """Median interval between changes of `column`: how often the reading really refreshes."""
    s = samples[["t_ns", column]].dropna()
    if len(s) < 3:
        return float("nan")
    changed = s[column].ne(s[column].shift())
    t = s.loc[changed, "t_ns"].to_numpy()[1:]  # the first row is a change by definition
    return float(np.median(np.diff(t)) / 1e9) if len(t) >= 2 else float("nan")


@dataclass(frozen=True)
class WindowPower:
    energy_j: float  # cumulative-counter difference over the window
    seconds: float
    peak_w: float  # max of the instant field (or of polled power where none)
    polled_mean_w: float  # mean of nvmlDeviceGetPowerUsage: lags (a ~1 s running average)
    samples: int
    resolution_s: float  # effective refresh interval of the polled power
    energy_resolution_s: float
    sm_clock_mean_mhz: float = float("nan")  # mean of the polled SM clock (V1's power state)

    @property
    def mean_w(self) -> float:
        """Mean power from the energy counter (energy / time).

        The polled reading is a running average that still carries the previous phase:
        on an H200, a 1.5 s communication-only window right after matmuls read 323 W
        polled but 123 W by the counter. The counter is the one to trust for a window.
        """
        return self.energy_j / self.seconds if self.seconds > 0 else float("nan")


def window_power(samples: pd.DataFrame) -> WindowPower:
    """Summarise the samples of one window (a sampler's whole run)."""
    if samples.empty:
        nan = float("nan")
        return WindowPower(nan, 0.0, nan, nan, 0, nan, nan)
    peak_col = "power_instant_w" if samples["power_instant_w"].notna().any() else "power_w"
    seconds = (samples["t_ns"].iloc[-1] - samples["t_ns"].iloc[0]) / 1e9
    return WindowPower(
        energy_j=float(samples["energy_j"].iloc[-1] - samples["energy_j"].iloc[0]),
        seconds=float(seconds),
        peak_w=float(samples[peak_col].max()),
        polled_mean_w=float(samples["power_w"].mean()),
        samples=len(samples),
        resolution_s=effective_resolution_s(samples, "power_w"),
        energy_resolution_s=effective_resolution_s(samples, "energy_j"),
        sm_clock_mean_mhz=float(samples["sm_clock_mhz"].mean()),
    )


def refreshes(samples: pd.DataFrame, column: str = "energy_j") -> tuple[np.ndarray, np.ndarray]:
    """When a reading refreshed and its new value: a refresh happened between the poll
    before a change and the poll that saw it, so it is stamped midway (within half a
    poll interval); the first row's value is of unknown age and is not a refresh."""
    s = samples[["t_ns", column]].dropna()
    t, v = s["t_ns"].to_numpy(float), s[column].to_numpy(float)
    idx = np.flatnonzero(np.diff(v) != 0) + 1
    return (t[idx - 1] + t[idx]) / 2, v[idx]


def intervals_power(samples: pd.DataFrame, intervals_ns: list[tuple[int, int]]) -> WindowPower:
    """What the sampler saw over some intervals of its run (one phase's iterations of an
    interleaved timed pass). Mean power is the counter's energy between the first and the
    last refresh inside each interval, over their time: a counter refreshed every 100 ms
    read at an interval's ends would mix in the neighbours' power (by about 14 % for
    250 ms iterations). Intervals with fewer than two refreshes inside add nothing; if
    none has two, mean power is NaN (the resolution says why). Peak, polled mean and SM
    clock come from the polls inside the intervals; resolutions are the whole run's."""
    if samples.empty or not intervals_ns:
        return window_power(samples.iloc[:0])
    spans = np.asarray(intervals_ns, float)
    stamps, values = refreshes(samples)
    joules = inner_s = 0.0
    for a, b in spans:
        inside = (stamps >= a) & (stamps <= b)
        if inside.sum() >= 2:
            joules += values[inside][-1] - values[inside][0]
            inner_s += (stamps[inside][-1] - stamps[inside][0]) / 1e9
    seconds = float(np.sum(spans[:, 1] - spans[:, 0]) / 1e9)
    mean_w = joules / inner_s if inner_s > 0 else float("nan")
    t = samples["t_ns"].to_numpy(float)
    sel = samples[((t[:, None] >= spans[:, 0]) & (t[:, None] <= spans[:, 1])).any(axis=1)]
    peak_col = "power_instant_w" if samples["power_instant_w"].notna().any() else "power_w"
    nan = float("nan")
    return WindowPower(
        energy_j=mean_w * seconds,  # the phase's iterations at its mean power
        seconds=seconds,
        peak_w=float(sel[peak_col].max()) if len(sel) else nan,
        polled_mean_w=float(sel["power_w"].mean()) if len(sel) else nan,
        samples=len(sel),
        resolution_s=effective_resolution_s(samples, "power_w"),
        energy_resolution_s=effective_resolution_s(samples, "energy_j"),
        sm_clock_mean_mhz=float(sel["sm_clock_mhz"].mean()) if len(sel) else nan,
    )


def trace_base_ns(trace: dict) -> int:
    """Epoch ns that a torch.profiler trace's `ts` (microseconds) count from."""
    return int(trace.get("baseTimeNanoseconds", 0))


STATES = ("overlap", "compute_only", "comm_only", "idle")


def label_samples(
    samples: pd.DataFrame,
    table: pd.DataFrame,
    base_ns: int,
    comm: tuple[str, ...] = ("communication",),
    lookback_s: float = 0.0,
) -> pd.Series:
    """Each sample's kernel-timeline state: overlap, compute_only, comm_only or idle.

    A reading stands for the interval [t - lookback_s, t] (0: the instant of the poll;
    the refresh interval is a fairer choice for averaged fields); the state is the one
    that covers most of that interval.
    """
    to_ns = lambda us: base_ns + np.asarray(us, float) * 1e3  # noqa: E731
    comp = table[table["category"] == "compute"]
    com = table[table["category"].isin(comm)]
    comp_u = merge_intervals(to_ns(comp["start"]), to_ns(comp["start"] + comp["dur"]))
    comm_u = merge_intervals(to_ns(com["start"]), to_ns(com["start"] + com["dur"]))
    both = intersect(comp_u, comm_u)
    labels = []
    eps = 1.0  # ns: a zero-length window still probes the instant
    for t in samples["t_ns"].to_numpy(dtype=float):
        w = np.array([[t - max(lookback_s * 1e9, eps), t]])
        o = intersection_length(w, both)
        c = intersection_length(w, comp_u) - o
        m = intersection_length(w, comm_u) - o
        idle = (w[0, 1] - w[0, 0]) - o - c - m
        labels.append(STATES[int(np.argmax([o, c, m, idle]))])
    return pd.Series(labels, index=samples.index, name="state")
