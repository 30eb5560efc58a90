"""What a power sampler's samples say (docs/design.md section 3, "Power"): a window's
power from the energy counter, the power of some intervals of a run (one phase's
iterations of an interleaved pass), and each sample's kernel-timeline state (Fig. 7).

Samples are a DataFrame of t_ns (epoch nanoseconds, the clock torch.profiler traces are
based on: `baseTimeNanoseconds` + ts) and the device fields (measure.device.FIELDS), as
measure.power's sampler writes them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from artifact.measure.kernels import intersect, intersection_length, merge_intervals


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
