"""torch.profiler trace -> kernel table -> per-iteration times by category and overlap.

A kernel is *communication* if its name matches the NCCL/RCCL kernel patterns (RCCL's
kernels are also named ncclDevKernel_*) or, on CPU traces, a gloo collective; *memory*
if it is a memcpy/memset, one of FSDP2's copy-in/copy-out kernels or a kernel launched
filling a no-op collective's outputs (STAND_IN_MARK); else *compute*
(docs/design.md section 3).

CPU traces have no kernels, so the same code path is exercised on the host ops: compute
is the leaf GEMM ops (aten::mm/addmm/bmm/baddbmm: their callers aten::matmul/linear
wrap them and would be counted twice) and aten::add, communication the `gloo:*` ranges
that gloo's worker threads record.

Iterations are the `artifact.iter#N` ranges that `iteration_marker` records on the host.
A GPU kernel belongs to the iteration whose range holds the host call that launched it
(joined through the profiler's correlation id), since the kernel itself runs later.
"""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from artifact.measure import occupancy

CATEGORIES = ("compute", "communication", "memory", "delay")
ITER_PREFIX = "artifact.iter#"
DELAY_MARK = "artifact.delay"  # the host range around a CPU delay (artifact.workloads.microbench)
# the host range around nocomm's (and the zero-byte controls') filling of a collective's
# outputs (artifact.rank.modes): at W > 1 a gather's fill is an elementwise copy kernel,
# not a memcpy, and counted as compute it made nocomm's compute longer than sequential's
# (docs/history.md), where the real or emulated collective fills the same outputs as
# communication. Kernels launched inside it are memory.
STAND_IN_MARK = "artifact.stand_in_fill"
# the host range around one collective's emulated traffic (--emulate-world,
# artifact.rank.emulation): the copies and the pacing kernel it launches are communication
EMULATED_MARK = "artifact.emulated_comm"

# ncclDevKernel_* / ncclKernel_* (RCCL's too), NCCL's one-rank reduction kernel, which a
# one-GPU all-reduce with op AVG runs (a mangled name from NCCL's onerank.cu), and the
# NCCL-shaped stand-in's Triton kernel (artifact.workloads.nccl_shaped)
COMM_KERNEL = re.compile(r"^(nccl|rccl)|oneRankReduce|standin_ring", re.IGNORECASE)
MEMORY_KERNEL = re.compile(r"^(memcpy|memset)", re.IGNORECASE)
# FSDP2's copies around its collectives on CUDA (torch 2.13, _fsdp_collectives.py): the
# foreach copy that packs the shards into the all-gather buffer (UnaryOpFunctor with a
# Copy op; CopyFunctor where it also casts to the compute dtype), split_with_sizes_copy's
# kernel that unpacks the gathered buffer into the parameters, and chunk_cat's that packs
# the gradients into the reduce-scatter buffer. They only feed and drain collectives, so
# they count as memory, not as the model's compute (no other workload here launches them).
FSDP2_COPY_KERNEL = re.compile(
    r"chunk_cat_cuda_kernel|split_with_sizes_copy_out|multi_tensor_apply_kernel<.*\bCopy<"
)
DELAY_KERNEL = re.compile(r"spin_kernel")  # torch.cuda._sleep's kernel (at::cuda::...::spin_kernel)
GPU_CATEGORIES = {"kernel", "gpu_memcpy", "gpu_memset"}
LAUNCH_CATEGORIES = {"cuda_runtime", "cuda_driver"}  # ROCm traces use the same names
# aten::add: the contention map's memory-bound compute (an elementwise add)
CPU_COMPUTE_OPS = {
    "aten::mm",
    "aten::addmm",
    "aten::bmm",
    "aten::baddbmm",
    "aten::_scaled_mm",
    "aten::add",
}
CPU_COMM = re.compile(r"^gloo:")

COLUMNS = ["name", "stream", "start", "dur", "category", "iteration"]


def iteration_marker(i: int) -> torch.profiler.record_function:
    """Context manager marking iteration i in the trace."""
    return torch.profiler.record_function(f"{ITER_PREFIX}{i}")


def load_trace(path: Path | str) -> dict[str, Any]:
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:
        return json.load(f)


def classify_gpu(name: str, trace_cat: str) -> str:
    if trace_cat in ("gpu_memcpy", "gpu_memset") or MEMORY_KERNEL.match(name):
        return "memory"
    if FSDP2_COPY_KERNEL.search(name):
        return "memory"
    if COMM_KERNEL.search(name):
        return "communication"
    if DELAY_KERNEL.search(name):
        return "delay"
    return "compute"


def _ranges(marks: list[tuple[float, float, int]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(start, end, id) host ranges as _assign takes them: sorted, one array each."""
    if not marks:
        return np.array([]), np.array([]), np.array([], dtype=int)
    starts, ends, ids = (np.array(x) for x in zip(*sorted(marks), strict=True))
    return starts.astype(float), ends.astype(float), ids.astype(int)


def _iteration_ranges(events: list[dict]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return _ranges(
        [
            (e["ts"], e["ts"] + e["dur"], int(e["name"][len(ITER_PREFIX) :]))
            for e in events
            if e.get("ph") == "X"
            and e.get("cat") == "user_annotation"
            and str(e.get("name", "")).startswith(ITER_PREFIX)
        ]
    )


def _marked(events: list[dict], name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The host ranges named `name`, as _assign takes them (every id 0)."""
    return _ranges(
        [
            (e["ts"], e["ts"] + e["dur"], 0)
            for e in events
            if e.get("cat") == "user_annotation" and e.get("name") == name
        ]
    )


def _assign(ts: np.ndarray, ranges: tuple[np.ndarray, np.ndarray, np.ndarray]) -> np.ndarray:
    starts, ends, ids = ranges
    if len(starts) == 0:
        return np.zeros(len(ts), dtype=int)
    pos = np.searchsorted(starts, ts, side="right") - 1
    inside = (pos >= 0) & (ts <= ends[np.clip(pos, 0, None)])
    return np.where(inside, ids[np.clip(pos, 0, None)], -1)


def kernel_table(trace: dict[str, Any]) -> pd.DataFrame:
    """One row per device kernel (GPU traces) or per compute/comm host op (CPU traces).

    Columns: name, stream, start (us), dur (us), category, iteration (-1: outside any
    marked iteration; 0 for every row when the trace has no iteration marks).
    """
    events = [e for e in trace.get("traceEvents", []) if e.get("ph") == "X" and "dur" in e]
    ranges = _iteration_ranges(events)
    gpu = [e for e in events if e.get("cat") in GPU_CATEGORIES]
    if gpu:
        launch_ts = {
            e["args"]["correlation"]: e["ts"]
            for e in events
            if e.get("cat") in LAUNCH_CATEGORIES and "correlation" in e.get("args", {})
        }
        rows = [
            (
                e["name"],
                e.get("args", {}).get("stream", e.get("tid")),
                float(e["ts"]),
                float(e["dur"]),
                classify_gpu(e["name"], e["cat"]),
                launch_ts.get(e.get("args", {}).get("correlation"), e["ts"]),
            )
            for e in gpu
        ]
    else:
        rows = []
        for e in events:
            name = str(e.get("name", ""))
            if e.get("cat") == "cpu_op" and name in CPU_COMPUTE_OPS:
                cat = "compute"
            elif e.get("cat") == "user_annotation" and (
                CPU_COMM.match(name) or name == EMULATED_MARK
            ):
                cat = "communication"
            elif e.get("cat") == "user_annotation" and name == DELAY_MARK:
                cat = "delay"
            else:
                continue
            rows.append((name, e.get("tid"), float(e["ts"]), float(e["dur"]), cat, e["ts"]))
    if not rows:
        return pd.DataFrame(columns=COLUMNS)
    df = pd.DataFrame(rows, columns=[*COLUMNS[:-1], "host_ts"])
    host_ts = df.pop("host_ts").to_numpy(dtype=float)
    # kernels launched inside a marked host range take the range's category: emulated
    # traffic is communication, a stand-in's fills feed no model compute (memory)
    for mark, category in ((EMULATED_MARK, "communication"), (STAND_IN_MARK, "memory")):
        marked = _marked(events, mark)
        if gpu and len(marked[0]):
            df.loc[_assign(host_ts, marked) >= 0, "category"] = category
    df["iteration"] = _assign(host_ts, ranges)
    return df.sort_values("start", ignore_index=True)


def merge_intervals(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Union of [start, end) intervals as an (m, 2) array of disjoint sorted segments."""
    if len(starts) == 0:
        return np.empty((0, 2))
    order = np.argsort(starts, kind="stable")
    s, e = np.asarray(starts, float)[order], np.asarray(ends, float)[order]
    reach = np.maximum.accumulate(e)
    new = np.empty(len(s), dtype=bool)
    new[0] = True
    new[1:] = s[1:] > reach[:-1]
    seg_start = s[new]
    seg_end = reach[np.r_[np.flatnonzero(new)[1:] - 1, len(s) - 1]]
    return np.column_stack([seg_start, seg_end])


def intersect(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Intersection of two merged interval sets, itself merged (two-pointer sweep)."""
    out, i, j = [], 0, 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i, 0], b[j, 0]), min(a[i, 1], b[j, 1])
        if hi > lo:
            out.append((lo, hi))
        if a[i, 1] < b[j, 1]:
            i += 1
        else:
            j += 1
    return np.array(out, dtype=float).reshape(-1, 2)


def intersection_length(a: np.ndarray, b: np.ndarray) -> float:
    """Total length of the intersection of two merged interval sets."""
    both = intersect(a, b)
    return float((both[:, 1] - both[:, 0]).sum())


def _union_of(df: pd.DataFrame, categories: tuple[str, ...]) -> np.ndarray:
    sel = df[df["category"].isin(categories)]
    return merge_intervals(sel["start"].to_numpy(), (sel["start"] + sel["dur"]).to_numpy())


def overlap_fraction(df: pd.DataFrame, comm: tuple[str, ...] = ("communication",)) -> float:
    """Time with compute and communication both active / time communication is active.

    `comm` names the categories that play communication: ("memory",) for the one-GPU
    proxy, where a device copy stands in for the all-reduce. NaN if there is none.
    """
    comm_union = _union_of(df, comm)
    comm_time = float((comm_union[:, 1] - comm_union[:, 0]).sum())
    if comm_time == 0:
        return float("nan")
    return intersection_length(_union_of(df, ("compute",)), comm_union) / comm_time


def per_iteration(
    df: pd.DataFrame, iterations: int, comm: tuple[str, ...] = ("communication",)
) -> pd.DataFrame:
    """Iterations 0..iterations-1: summed kernel time (us) per category and overlap fraction.

    An iteration that ran no kernel of a category has 0 us of it (a one-rank all-reduce
    launches no kernel at all), and NaN overlap when it ran no communication.
    """
    df = df[df["iteration"] >= 0]
    sums = (
        df.pivot_table(index="iteration", columns="category", values="dur", aggfunc="sum")
        .reindex(index=range(iterations), columns=list(CATEGORIES))
        .fillna(0.0)
    )
    sums.columns = [f"{c}_us" for c in sums.columns]
    # the device's busy span of each iteration: first kernel start to last kernel end,
    # the profiled counterpart of the timed E2E (docs/measurement.md, "Consistency")
    end = df["start"] + df["dur"]
    span = end.groupby(df["iteration"]).max() - df["start"].groupby(df["iteration"]).min()
    sums["span_us"] = span.reindex(range(iterations)).fillna(0.0).to_numpy()
    groups = dict(list(df.groupby("iteration")))
    sums["overlap_fraction"] = [
        overlap_fraction(groups[i], comm) if i in groups else float("nan") for i in sums.index
    ]
    return sums.rename_axis("iteration").reset_index()


# the profiler's launch record of a GPU kernel (Kineto's args): what one CTA holds of an SM
FOOTPRINT = {
    "threads_per_cta": lambda a: int(np.prod(a["block"])),
    "grid_ctas": lambda a: int(np.prod(a["grid"])),
    "regs_per_thread": lambda a: int(a["registers per thread"]),
    "smem_per_cta_bytes": lambda a: int(a["shared memory"]),
}
FOOTPRINT_OF = {"compute": "compute", "communication": "comm"}  # category -> metric prefix


def footprints(trace: dict[str, Any]) -> dict[str, float]:
    """For compute and for communication, the footprint of the kernel that ran longest in
    that category (its grid, threads, registers and shared memory a CTA), as
    `compute_grid_ctas`, `comm_regs_per_thread`, ..., and the GPU's SMs: whether a GEMM's CTA can share an SM
    with a collective's, and whether the GEMM is persistent (grid <= SMs). GPU traces only
    ({} where no kernel carries launch arguments, as on a CPU)."""
    time: dict[tuple[str, str], float] = {}
    args: dict[tuple[str, str], dict] = {}
    for e in trace.get("traceEvents", []):
        a = e.get("args", {})
        if e.get("cat") != "kernel" or "grid" not in a or "registers per thread" not in a:
            continue
        key = (classify_gpu(e["name"], e["cat"]), e["name"])
        time[key] = time.get(key, 0.0) + float(e.get("dur", 0.0))
        args[key] = a
    out: dict[str, float] = {}
    device = next((d for d in trace.get("deviceProperties", []) if d.get("numSms")), None)
    if time and device:  # the GPU's SMs: a grid of at most this many CTAs is one wave
        out["gpu_sms"] = float(device["numSms"])
    for category, prefix in FOOTPRINT_OF.items():
        mine = [k for k in time if k[0] == category]
        if mine:
            a = args[max(mine, key=time.__getitem__)]
            out |= {f"{prefix}_{name}": float(get(a)) for name, get in FOOTPRINT.items()}
    return out | _room(out, device)


def _room(f: dict[str, float], device: dict | None) -> dict[str, float]:
    """The GEMM's CTAs an SM holds alone and beside one collective CTA (measure.occupancy),
    where the trace gives both footprints and the SM's limits."""
    limits = ("regsPerMultiprocessor", "sharedMemPerMultiprocessor", "maxThreadsPerMultiprocessor")
    have = all(f"{p}_regs_per_thread" in f for p in ("compute", "comm"))
    if not have or not device or not all(device.get(k) for k in limits):
        return {}
    sm = occupancy.Sm(*(int(device[k]) for k in limits))

    def of(p):
        return occupancy.Footprint(
            int(f[f"{p}_threads_per_cta"]),
            int(f[f"{p}_regs_per_thread"]),
            int(f[f"{p}_smem_per_cta_bytes"]),
        )

    return {
        "compute_ctas_per_sm": float(occupancy.ctas_fit(sm, of("compute"))),
        "compute_ctas_beside_comm": float(occupancy.ctas_fit(sm, of("compute"), of("comm"))),
    }


def holder_first_fraction(df: pd.DataFrame) -> float:
    """Of the (collective, compute) kernel pairs that ran side by side, the fraction whose
    collective kernel started first: the launch order the GPU ran, not the one the host
    asked for. NaN where no pair overlapped."""
    comm = df[df["category"] == "communication"]
    comp = df[df["category"] == "compute"]
    if comm.empty or comp.empty:
        return float("nan")
    cs, ce = comm["start"].to_numpy()[:, None], (comm["start"] + comm["dur"]).to_numpy()[:, None]
    gs, ge = comp["start"].to_numpy()[None, :], (comp["start"] + comp["dur"]).to_numpy()[None, :]
    side_by_side = (cs < ge) & (gs < ce)
    pairs = int(side_by_side.sum())
    return float((side_by_side & (cs <= gs)).sum() / pairs) if pairs else float("nan")
