"""The profiled pass (docs/design.md section 3): a phase's iterations under
torch.profiler, each marked, parsed into the kernel table (per-iteration compute,
communication and memory time, the overlap fraction); separate from the timed pass, so
profiler overhead never reaches E2E. Traces are written whole or not at all."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch.profiler import ProfilerActivity, profile

from artifact.measure import kernels
from artifact.measure.timing import synchronize
from artifact.rank.context import RunContext


def _profiler_options(device: torch.device) -> dict[str, Any]:
    """On a CPU, ops of every thread: V2's delayed communication chain runs in a thread of
    its own (artifact.workloads.microbench), and the profiler sees only the calling
    thread's ops otherwise. GPU kernels are recorded whatever thread launched them."""
    if device.type == "cuda":
        return {}
    from torch._C._profiler import _ExperimentalConfig

    return {"experimental_config": _ExperimentalConfig(profile_all_threads=True)}


def profiler_activities(device: torch.device) -> list[ProfilerActivity]:
    acts = [ProfilerActivity.CPU]
    if device.type == "cuda":
        acts.append(ProfilerActivity.CUDA)
    return acts


def profiled_name(key: str) -> str:
    """The name a profiled metric keeps where a meter of the timed pass gives its own."""
    stem, _, unit = key.rpartition("_")
    return f"{stem}_profiled_{unit}"


def profiled_pass(
    ctx: RunContext,
    step: Callable[[], None],
    trace_name: str,
    keep_trace: bool,
    comm: tuple[str, ...],
    iters: int,
) -> dict[str, list[float]]:
    """`iters` iterations under torch.profiler, each marked, parsed into the kernel table:
    per-iteration compute, communication and memory time, the overlap fraction and the
    device's span of the iteration (and V2's injected delay where there is one)."""
    with tempfile.TemporaryDirectory() as tmp:
        with profile(
            activities=profiler_activities(ctx.device), **_profiler_options(ctx.device)
        ) as prof:
            for i in range(iters):
                ctx.progress(f"{trace_name}: profiled iteration {i + 1}/{iters}")
                with kernels.iteration_marker(i):
                    step()
                synchronize(ctx.device)
        path = Path(tmp) / "trace.json"
        if keep_trace and ctx.traces_dir is not None:
            ctx.traces_dir.mkdir(parents=True, exist_ok=True)
            path = ctx.traces_dir / f"{trace_name}-rank{ctx.rank}.json"
        trace = _export_trace(prof, path)
        table = kernels.kernel_table(trace)
        footprint = kernels.footprints(trace)
    per_iter = kernels.per_iteration(table, iters, comm)
    out = {
        "compute_ms": (per_iter["compute_us"] / 1e3).tolist(),
        "communication_ms": (per_iter["communication_us"] / 1e3).tolist(),
        "memory_ms": (per_iter["memory_us"] / 1e3).tolist(),
        "overlap_fraction": per_iter["overlap_fraction"].tolist(),
        # E2E of the profiled pass as the device saw it: E2E / this shows whether the
        # timed and the profiled passes ran alike (Eq. 4 mixes the two)
        "profiled_span_ms": (per_iter["span_us"] / 1e3).tolist(),
    }
    if per_iter["delay_us"].any():  # only V2 injects a delay; other records stay as they were
        out["delay_ms"] = (per_iter["delay_us"] / 1e3).tolist()
    # GPU traces: the kernels' footprints, and which of a side-by-side pair started first
    out |= {k: [v] * iters for k, v in footprint.items()}
    if footprint and (table["category"] == "communication").any():
        mine = table[table["iteration"] >= 0]
        first = [kernels.holder_first_fraction(mine[mine["iteration"] == i]) for i in range(iters)]
        out["holder_first_fraction"] = first
    return out


def _export_trace(prof, path: Path) -> dict:
    """Export under a hidden temporary name, read it back whole, then rename: a kill or a
    full disk never leaves a truncated trace under its final name. The read is the check:
    kineto's writer says nothing when the disk fills (a 12 KiB invalid trace was renamed
    into place on a full disk), so a trace that does not parse is a full disk's doing."""
    from artifact.store import NoSpace, free_bytes

    tmp_path = path.with_name(f".{path.name}.tmp")
    try:
        try:
            prof.export_chrome_trace(str(tmp_path))
            trace = kernels.load_trace(tmp_path)
        except (OSError, ValueError) as e:
            written = tmp_path.stat().st_size if tmp_path.exists() else 0
            raise NoSpace(
                f"cannot write the trace '{path}' ({getattr(e, 'strerror', None) or 'cut short'} "
                f"after {written} bytes, {free_bytes(path.parent)} bytes free): free some "
                "space and re-run (finished repetitions are kept)"
            ) from None
        os.replace(tmp_path, path)
    finally:
        tmp_path.unlink(missing_ok=True)
    return trace
