"""Where a training step's GPU time goes: forward, backward and optimizer step, each as
wall span against kernel-busy time, from a torch.profiler Chrome trace.

Reads the traces `benchmarks/fsdp_mfu.py --trace DIR` writes (DIR/<impl>/trace.json.gz).
A step ends with torch's `Optimizer.step` annotation on the GPU timeline; its backward
starts at the step's first kernel named *bwd* or *backward*. Busy time is the union of
kernels, copies and memsets; span minus busy is time the GPU waited, for the host or a
synchronisation. `after_sync` is the GPU's idle time that follows host-device
synchronisations (cudaStreamSynchronize and kin, on the host timeline): from the end of a
sync that found the GPU idle to its next work, the time the host took to queue more after
draining it. Profiling itself adds host time, so compare implementations within one
trace set, not against untraced step times. Prints one JSON object.

    python benchmarks/trace_phases.py results/h200x1/session6/bench/trace/*/trace.json.gz
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import numpy as np

# this checkout's artifact package, not another one an editable install may point to
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from artifact.measure.kernels import (  # noqa: E402
    intersection_length,
    kernel_table,
    load_trace,
    merge_intervals,
)


def phases(trace: dict) -> list[dict[str, float]]:
    """Per step: span and busy milliseconds of forward, backward and optimizer step."""
    work = kernel_table(trace)  # the GPU's kernels, copies and memsets, by start
    steps = sorted(
        (e["ts"], e["ts"] + e["dur"])
        for e in trace["traceEvents"]
        if e.get("ph") == "X"
        and e.get("cat") == "gpu_user_annotation"
        and e["name"].startswith("Optimizer.step")
    )
    if work.empty or not steps:
        return []
    starts, busy = work["start"].to_numpy(), _busy(work)
    backward = starts[work["name"].map(_is_backward).to_numpy(dtype=bool)]

    def window(a: float, b: float) -> dict[str, float]:
        inside = intersection_length(busy, np.array([[a, b]]))
        return {"span_ms": (b - a) / 1e3, "busy_ms": inside / 1e3}

    def backward_in(a: float, b: float) -> np.ndarray:
        return backward[(backward >= a) & (backward < b)]

    # DeepSpeed steps its optimizer once a parameter sub-group, with copies between: an
    # annotation with no backward kernel since the previous one continues that step
    merged: list[list[float]] = []
    for opt_start, opt_end in steps:
        if merged and not len(backward_in(merged[-1][1], opt_start)):
            merged[-1][1] = opt_end
        else:
            merged.append([opt_start, opt_end])
    rows, start = [], starts[0]
    for opt_start, opt_end in merged:
        bwd = backward_in(start, opt_start)
        split = bwd.min() if len(bwd) else opt_start
        row = {}
        for name, (a, b) in (
            ("forward", (start, split)),
            ("backward", (split, opt_start)),
            ("optimizer", (opt_start, opt_end)),
        ):
            row |= {f"{name}_{k}": v for k, v in window(a, b).items()}
        rows.append(row)
        start = opt_end
    return rows


SYNC_CALLS = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize")


def sync_gaps(trace: dict) -> dict[str, float]:
    """Host-device synchronisations, and the GPU idle time from the end of each that left
    the GPU idle to the GPU's next work (microseconds, the whole trace)."""
    work = kernel_table(trace)
    syncs = [
        e["ts"] + e["dur"]
        for e in trace["traceEvents"]
        if e.get("ph") == "X" and e.get("name") in SYNC_CALLS
    ]
    if work.empty:
        return {"syncs": len(syncs), "idle_after_us": 0.0}
    busy, idle = _busy(work), 0.0
    for end in syncs:
        later = busy[busy[:, 0] >= end]
        running = ((busy[:, 0] < end) & (busy[:, 1] > end)).any()
        if len(later) and not running:  # nothing left on the GPU when the host returned
            idle += later[0, 0] - end
    return {"syncs": len(syncs), "idle_after_us": idle}


def _busy(work) -> np.ndarray:
    """The union of the GPU's work intervals (kernel_table's rows), as [start, end] rows."""
    starts = work["start"].to_numpy()
    return merge_intervals(starts, starts + work["dur"].to_numpy())


def _is_backward(kernel_name: str) -> bool:
    name = kernel_name.lower()
    return "bwd" in name or "backward" in name


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("traces", nargs="+", help="Chrome traces (.json or .json.gz)")
    args = p.parse_args(argv)
    out = {}
    for path in args.traces:
        trace = load_trace(path)
        rows = phases(trace)
        if not rows:
            print(
                f"error: no GPU kernels or no Optimizer.step annotation on the GPU timeline in {path}",
                file=sys.stderr,
            )
            return 2
        # the first step may carry the profiler's start-up: the median of the steps
        out[path] = {"steps": len(rows)} | {
            key: round(statistics.median(r[key] for r in rows), 1) for key in rows[0]
        }
        gaps = sync_gaps(trace)  # a step's share, over the profiled steps
        out[path] |= {
            "syncs_per_step": round(gaps["syncs"] / len(rows), 1),
            "idle_after_sync_ms_per_step": round(gaps["idle_after_us"] / 1e3 / len(rows), 1),
        }
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
