"""Power telemetry on CPU: backend detection, and the sampler's logic behind a fake device.

The fake stands in only at the hardware seam (the readings NVML would return): a power
reading that refreshes every 100 ms, as NVML's does on an H200, and an energy counter
that grows at a known rate.
"""

import math
import re
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from artifact.core.errors import ArtifactError
from artifact.measure import device, power, telemetry


class FakeTelemetry:
    name = "fake"

    def __init__(self, watts=500.0, refresh_s=0.1):
        self.t0, self.watts, self.refresh = time.perf_counter(), watts, refresh_s

    def read(self):
        t = time.perf_counter() - self.t0
        step = math.floor(t / self.refresh)  # what the device shows changes every refresh_s
        p = self.watts + (step % 2) * 10
        return (p, p + 50, self.watts * step * self.refresh, 1980.0, 50.0)

    def power_limit_w(self):
        return 700.0

    def limit_range_w(self):
        return (200.0, 700.0)

    def close(self):
        pass


def test_auto_backend_on_a_machine_without_gpu_is_none():
    backend = power.open_backend("auto")
    assert backend.name == "none"
    assert all(math.isnan(v) for v in backend.read())
    assert math.isnan(backend.power_limit_w())


def test_without_gpu_the_device_layer_says_why_each_backend_failed():
    with pytest.raises(device.Unavailable, match=r"^nvml: \w+ \(.+\); amdsmi: \w+ \(.+\)$"):
        device.open_gpu(0)
    assert device.driver_version("nvml") is None


def test_only_the_device_layer_calls_nvml_or_amdsmi():
    package = Path(device.__file__).parents[1]
    imports = re.compile(r"^\s*(import|from)\s+(pynvml|amdsmi)\b", re.M)
    callers = [p for p in package.rglob("*.py") if imports.search(p.read_text())]
    assert callers == [Path(device.__file__)]


def test_unknown_backend_is_a_clear_error():
    with pytest.raises(
        ArtifactError, match="unknown power backend 'rapl'; accepted: auto, nvml, amdsmi, none"
    ):
        power.open_backend("rapl")


def test_sampler_measures_effective_resolution_and_counter_energy():
    with power.PowerSampler(FakeTelemetry(), interval_s=0.01) as sampler:
        time.sleep(1.05)
    s = sampler.samples()
    assert list(s.columns) == ["t_ns", *power.FIELDS]
    assert 60 <= len(s) <= 110  # polled at ~100 Hz
    res = telemetry.effective_resolution_s(s, "power_w")
    assert res == pytest.approx(0.1, rel=0.3)  # the refresh, not the 10 ms poll interval
    w = telemetry.window_power(s)
    assert w.mean_w == pytest.approx(500.0, rel=0.15)  # energy counter over time
    assert w.peak_w == pytest.approx(560.0)  # from the instant field
    assert w.resolution_s == pytest.approx(0.1, rel=0.3)


def test_window_power_by_hand():
    s = pd.DataFrame(
        {
            "t_ns": [0, 500_000_000, 1_000_000_000, 2_000_000_000],
            "power_w": [300.0, 300.0, 400.0, 400.0],
            "power_instant_w": [310.0, 900.0, 420.0, 400.0],
            "energy_j": [1000.0, 1150.0, 1400.0, 1800.0],
            "sm_clock_mhz": [1980.0, 1755.0, 1755.0, 1530.0],
            "temp_c": [40.0] * 4,
        }
    )
    w = telemetry.window_power(s)
    assert w.sm_clock_mean_mhz == 1755.0
    assert w.energy_j == 800.0 and w.seconds == 2.0
    assert w.mean_w == 400.0  # 800 J over 2 s, whatever the polled readings say
    assert w.polled_mean_w == 350.0
    assert w.peak_w == 900.0


def test_label_samples_on_the_kernel_timeline():
    # compute [0, 100) us, communication [50, 150) us, base 1 s after the epoch
    table = pd.DataFrame(
        {
            "name": ["gemm", "nccl"],
            "stream": [7, 9],
            "start": [0.0, 50.0],
            "dur": [100.0, 100.0],
            "category": ["compute", "communication"],
            "iteration": [0, 0],
        }
    )
    base = 1_000_000_000
    t_us = [25, 75, 125, 175]
    samples = pd.DataFrame({"t_ns": [base + t * 1000 for t in t_us]})
    labels = telemetry.label_samples(samples, table, base)
    assert list(labels) == ["compute_only", "overlap", "comm_only", "idle"]


class ScriptedSampler:
    """The sampler seam: the polls a device would have given, at known times (a 300 W
    phase, then 600 W, the energy counter refreshed every 100 ms), whenever it runs."""

    def __init__(self, backend, interval_s):
        t = np.arange(0, 2_000_000_001, 50_000_000)  # a poll every 50 ms for 2 s
        watts = np.where(t < 1_000_000_000, 300.0, 600.0)
        refreshed = (t // 100_000_000) * 100_000_000
        energy = np.where(
            refreshed < 1e9, 300.0 * refreshed / 1e9, 300.0 + 600.0 * (refreshed - 1e9) / 1e9
        )
        clock = np.where(t < 1_000_000_000, 1980.0, 1755.0)
        self.rows = pd.DataFrame(
            {"t_ns": t, "power_w": watts, "power_instant_w": watts + 20, "energy_j": energy,
             "sm_clock_mhz": clock, "temp_c": 50.0}
        )  # fmt: skip
        self.entered = self.exited = 0

    def __enter__(self):
        self.entered += 1
        return self

    def __exit__(self, *exc):
        self.exited += 1

    def samples(self):
        return self.rows


def _monitor(times):
    made = []

    def sampler(backend, interval_s):
        made.append(ScriptedSampler(backend, interval_s))
        return made[-1]

    stamps = iter(times)
    monitor = power.PowerMonitor(FakeTelemetry(), 0.05, sampler=sampler, clock=lambda: next(stamps))
    return monitor, made


def test_two_verbs_measure_nested_windows_from_the_counter():
    """The whole 2 s window, and a 400 ms block of the 600 W phase inside it: each reads
    its own energy and mean power; one sampler serves both, stopped by the last end."""
    ms = 1_000_000
    monitor, made = _monitor([0, 1200 * ms, 1600 * ms, 2000 * ms])
    monitor.begin_window("all")
    monitor.begin_window("block")
    block = monitor.end_window("block")
    assert made[0].exited == 0  # "all" is still open: the sampler polls on
    whole = monitor.end_window("all")
    assert len(made) == 1 and made[0].entered == made[0].exited == 1
    assert (block.start_ns, block.end_ns) == (1200 * ms, 1600 * ms)
    assert block.power.energy_j == pytest.approx(240.0)  # 600 W x 0.4 s
    assert block.power.mean_w == pytest.approx(600.0)
    assert block.power.peak_w == 620.0 and block.power.sm_clock_mean_mhz == 1755.0
    assert len(block.samples) == 9  # polls at 1200, 1250, ..., 1600 ms
    assert whole.power.energy_j == pytest.approx(900.0)  # 300 J, then 600 J
    assert whole.power.mean_w == pytest.approx(450.0) and whole.power.seconds == 2.0
    assert math.isnan(whole.power.resolution_s)  # polled power changed once: no interval
    assert whole.power.energy_resolution_s == pytest.approx(0.1)


def test_a_window_without_telemetry_is_none_and_misuse_is_refused():
    monitor = power.PowerMonitor(power.NoneBackend())
    monitor.begin_window("a")
    assert monitor.end_window("a") is None
    with pytest.raises(ValueError, match="power window 'b' was not begun; open: none"):
        monitor.end_window("b")
    monitor.begin_window("a")
    with pytest.raises(ValueError, match="power window 'a' is open already"):
        monitor.begin_window("a")


def test_leaving_the_monitor_stops_its_sampler_whatever_is_open():
    monitor, made = _monitor([0, 1])
    with pytest.raises(RuntimeError), monitor:
        monitor.begin_window("a")
        raise RuntimeError("a phase ran out of memory")
    assert made[0].exited == 1
