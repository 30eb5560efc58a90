"""Benchmarks of the measurement core (`nox -s bench`), reported as medians and ratios.

1. profiler overhead: fig8's step timed with and without torch.profiler in one process;
2. trace parsing: our kernel table + per-iteration sums vs HolisticTraceAnalysis on the
   same real H200 trace (tests/data, its events repeated to about 20 MB), in MB/s;
3. power-sampler overhead: the sampler thread's CPU time per second, and the step's
   time with the sampler on vs off.
Runs on CPU (a one-process gloo group) or on a GPU. Usage:
    python benchmarks/bench_measure.py [--json OUT.json] [--trials N]
"""

from __future__ import annotations

import argparse
import copy
import json
import logging
import os
import statistics
import tempfile
import time
from pathlib import Path

import torch
import torch.distributed as dist
from torch.profiler import ProfilerActivity, profile

from artifact.measure import kernels, power
from artifact.measure.timing import synchronize, timed
from artifact.workloads.microbench import Microbench, MicrobenchSpec

ROOT = Path(__file__).resolve().parent.parent
TRACE = ROOT / "tests" / "data" / "h200_fig8_proxy_copy_overlap" / "rank0.json.gz"


def _init(device: torch.device) -> None:
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29533")
    backend = "nccl" if device.type == "cuda" else "gloo"
    dist.init_process_group(backend, rank=0, world_size=1)


def _bench(device: torch.device) -> Microbench:
    spec = (
        MicrobenchSpec(8192, "bf16", 1 << 30, 8, "copy")
        if device.type == "cuda"
        else MicrobenchSpec(384, "fp32", 4 << 20, 4, "allreduce")
    )
    bench = Microbench(spec, device)
    bench.calibrate(warmup=2)
    return bench


def profiler_overhead(bench: Microbench, trials: int) -> dict:
    step = lambda: bench.run_phase("overlap")  # noqa: E731
    plain, profiled = [], []
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if bench.device.type == "cuda" else [])
    for _ in range(trials):  # interleaved, so drift hits both alike
        plain.append(timed(step, bench.device))
        with profile(activities=acts):
            profiled.append(timed(step, bench.device))
    p, q = statistics.median(plain), statistics.median(profiled)
    return {"iter_ms_plain": p * 1e3, "iter_ms_profiled": q * 1e3, "profiler_overhead_ratio": q / p}


def _big_trace(repeat: int) -> dict:
    base = kernels.load_trace(TRACE)
    events = base["traceEvents"]
    span = max(e.get("ts", 0) + e.get("dur", 0) for e in events) - min(
        e.get("ts", 0) for e in events if "ts" in e
    )
    out = []
    for k in range(repeat):
        for e in events:
            e2 = copy.copy(e)
            if "ts" in e2:
                e2["ts"] = e2["ts"] + k * (span + 10)
            if "args" in e2 and "correlation" in e2["args"]:
                e2["args"] = {**e2["args"], "correlation": e2["args"]["correlation"] + k * 10**7}
            out.append(e2)
    return {**base, "traceEvents": out}


def parsing_throughput(trials: int, repeat: int = 100) -> dict:
    try:
        from hta.trace_analysis import TraceAnalysis
    except ImportError:  # GPU images without HTA: parsing is host work, measured on CPU runs
        return {"parsing": "skipped: HolisticTraceAnalysis not installed"}

    logging.getLogger().setLevel(logging.ERROR)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "rank0.json"
        path.write_text(json.dumps(_big_trace(repeat)))
        mb = path.stat().st_size / 1e6
        ours, hta = [], []
        for _ in range(trials):
            t0 = time.perf_counter()
            df = kernels.kernel_table(kernels.load_trace(path))
            kernels.overlap_fraction(df, ("memory",))
            df.groupby("category")["dur"].sum()
            ours.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            TraceAnalysis(trace_dir=tmp).get_gpu_kernel_breakdown(visualize=False)
            hta.append(time.perf_counter() - t0)
    o, h = statistics.median(ours), statistics.median(hta)
    return {"trace_mb": mb, "ours_MBps": mb / o, "hta_MBps": mb / h, "ours_over_hta_speed": h / o}


def sampler_overhead(bench: Microbench, trials: int, seconds: float = 1.0) -> dict:
    backend = power.open_backend("auto")
    # CPU time the sampler's thread costs, per second of sampling, on an idle process
    c0, w0 = time.process_time(), time.perf_counter()
    time.sleep(seconds)
    idle = (time.process_time() - c0) / (time.perf_counter() - w0)
    c0, w0 = time.process_time(), time.perf_counter()
    with power.PowerSampler(backend) as s:
        time.sleep(seconds)
    busy = (time.process_time() - c0) / (time.perf_counter() - w0)
    polls = len(s.samples())
    step = lambda: bench.run_phase("overlap")  # noqa: E731
    off, on = [], []
    for _ in range(trials):
        off.append(timed(step, bench.device))
        with power.PowerSampler(backend):
            on.append(timed(step, bench.device))
    synchronize(bench.device)
    backend.close()
    return {
        "sampler_backend": backend.name,
        "sampler_polls_per_s": polls / seconds,
        "sampler_cpu_fraction_of_a_core": busy - idle,
        "iter_ms_sampler_off": statistics.median(off) * 1e3,
        "iter_ms_sampler_on": statistics.median(on) * 1e3,
        "sampler_overhead_ratio": statistics.median(on) / statistics.median(off),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", type=Path)
    ap.add_argument("--trials", type=int, default=21)
    args = ap.parse_args()
    device = torch.device("cuda", 0) if torch.cuda.is_available() else torch.device("cpu")
    _init(device)
    bench = _bench(device)
    results = {"device": torch.cuda.get_device_name(0) if device.type == "cuda" else "cpu"}
    results |= profiler_overhead(bench, args.trials)
    results |= parsing_throughput(max(3, args.trials // 4))
    results |= sampler_overhead(bench, args.trials)
    dist.destroy_process_group()
    width = max(map(len, results))
    for k, v in results.items():
        print(f"{k:<{width}}  {v:.4g}" if isinstance(v, float) else f"{k:<{width}}  {v}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
