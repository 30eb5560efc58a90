"""Probe NVML on a GPU: which power readings exist and how often each really changes.

Run on a GPU machine: python benchmarks/nvml_probe.py. Reads only; changes nothing.
"""

import threading
import time

import pynvml
import torch

pynvml.nvmlInit()
h = pynvml.nvmlDeviceGetHandleByIndex(0)
print(
    "name", pynvml.nvmlDeviceGetName(h), "limit W", pynvml.nvmlDeviceGetEnforcedPowerLimit(h) / 1e3
)
print("limit range W", [x / 1e3 for x in pynvml.nvmlDeviceGetPowerManagementLimitConstraints(h)])
FI = {
    n: getattr(pynvml, n)
    for n in ("NVML_FI_DEV_POWER_INSTANT", "NVML_FI_DEV_POWER_AVERAGE")
    if hasattr(pynvml, n)
}
print("fields", FI)

stop = threading.Event()


def load():
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    while not stop.is_set():
        for _ in range(20):
            a @ a
        torch.cuda.synchronize()


t = threading.Thread(target=load)
t.start()
time.sleep(0.5)
readers = {
    "power_usage": lambda: pynvml.nvmlDeviceGetPowerUsage(h),
    "energy_mJ": lambda: pynvml.nvmlDeviceGetTotalEnergyConsumption(h),
    "sm_clock": lambda: pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM),
}
for name, fid in FI.items():
    readers[name] = lambda fid=fid: pynvml.nvmlDeviceGetFieldValues(h, [fid])[0].value.uiVal
for name, fn in readers.items():
    t0 = time.perf_counter()
    changes, last, n = [], None, 0
    while time.perf_counter() - t0 < 2.0:
        v = fn()
        n += 1
        now = time.perf_counter()
        if v != last:
            changes.append(now)
            last = v
        time.sleep(0.002)
    gaps = [b - a for a, b in zip(changes[1:], changes[2:], strict=False)]
    med = sorted(gaps)[len(gaps) // 2] if gaps else float("nan")
    print(
        f"{name}: {n} polls, {len(changes)} distinct, median change interval {med * 1e3:.1f} ms, last {last}"
    )
stop.set()
t.join()
