"""Where a training step's GPU time goes: forward, backward and optimizer step, each as
wall span against kernel-busy time, from a torch.profiler Chrome trace.

Reads the traces `benchmarks/fsdp_mfu.py --trace DIR` writes (DIR/<impl>/trace.json.gz).
A step ends with torch's `Optimizer.step` annotation on the GPU timeline; its backward
starts at the step's first kernel named *bwd* or *backward*. Busy time is the union of
kernels, copies and memsets; span minus busy is time the GPU waited, for the host or a
synchronisation. Profiling itself adds host time, so compare implementations within one
trace set, not against untraced step times. Prints one JSON object.

    python benchmarks/trace_phases.py results/h200x1/session6/bench/trace/*/trace.json.gz
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import sys

GPU_WORK = ("kernel", "gpu_memcpy", "gpu_memset")


def busy_us(intervals: list[tuple[float, float]]) -> float:
    """Length of the union of [start, end) intervals."""
    total, end = 0.0, float("-inf")
    for s, e in sorted(intervals):
        if s > end:
            total += e - s
            end = e
        elif e > end:
            total += e - end
            end = e
    return total


def phases(trace: dict) -> list[dict[str, float]]:
    """Per step: span and busy milliseconds of forward, backward and optimizer step."""
    events = [e for e in trace["traceEvents"] if e.get("ph") == "X"]
    work = sorted(
        (e["ts"], e["ts"] + e["dur"], e["name"]) for e in events if e.get("cat") in GPU_WORK
    )
    steps = sorted(
        (e["ts"], e["ts"] + e["dur"])
        for e in events
        if e.get("cat") == "gpu_user_annotation" and e["name"].startswith("Optimizer.step")
    )
    if not work or not steps:
        return []

    def window(a: float, b: float) -> dict[str, float]:
        inside = [(max(a, s), min(b, e)) for s, e, _ in work if s < b and e > a]
        return {"span_ms": (b - a) / 1e3, "busy_ms": busy_us(inside) / 1e3}

    # DeepSpeed steps its optimizer once a parameter sub-group, with copies between: an
    # annotation with no backward kernel since the previous one continues that step
    merged: list[list[float]] = []
    for opt_start, opt_end in steps:
        since = merged[-1][1] if merged else work[0][0]
        if merged and not any(since <= s < opt_start and _is_backward(n) for s, _, n in work):
            merged[-1][1] = opt_end
        else:
            merged.append([opt_start, opt_end])
    rows, start = [], work[0][0]
    for opt_start, opt_end in merged:
        backward = [s for s, _, n in work if start <= s < opt_start and _is_backward(n)]
        split = min(backward) if backward else opt_start
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


def _is_backward(kernel_name: str) -> bool:
    name = kernel_name.lower()
    return "bwd" in name or "backward" in name


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("traces", nargs="+", help="Chrome traces (.json or .json.gz)")
    args = p.parse_args(argv)
    out = {}
    for path in args.traces:
        opener = gzip.open if path.endswith(".gz") else open
        with opener(path, "rt") as f:
            rows = phases(json.load(f))
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
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
