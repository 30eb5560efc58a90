"""The per-rank run context and the collectives between ranks (docs/design.md section 3):
what every experiment's loop is handed (RunContext: the figure, preset, device, rank,
store, options and the progress beacon), one configuration of a sweep (ConfigPoint),
rank 0's decisions shared with every rank (broadcast, gather), and the checks between
repetitions and configurations (a Ctrl-C asked to stop, another job on our GPU)."""

from __future__ import annotations

import json
import logging
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import torch
import torch.distributed as dist

from artifact import procs
from artifact.core.config import Preset
from artifact.core.options import RunOptions
from artifact.measure import power
from artifact.measure.timing import synchronize
from artifact.rank import emulation
from artifact.store import STOPPING, RunStore, atomic_write_text

log = logging.getLogger(__name__)

PROGRESS_EVERY_S = 5.0  # how often the progress beacon may be rewritten (it is fsynced)


@dataclass
class RunContext:
    figure: str
    preset: Preset
    device: torch.device
    rank: int
    world_size: int
    store: RunStore
    provenance: dict[str, Any]
    reps: int
    warmup: int
    iters: int
    traces_dir: Path | None = None  # where rep 0's traces are kept; None keeps none
    options: RunOptions = field(default_factory=RunOptions)  # experiment knobs from the CLI
    gpu_index: int = 0  # the physical GPU (NVML's index) this rank drives
    power_backend: power.Backend = field(default_factory=power.NoneBackend)
    power_interval_s: float = power.DEFAULT_INTERVAL_S
    _last_progress: float = -1e9
    _last_step: str = ""
    where: dict[str, Any] = field(default_factory=dict)  # the beacon's fields, kept between calls
    # --adaptive: the repetitions decided for the configuration under way (None: not yet)
    decided: int | None = None

    @property
    def is_writer(self) -> bool:
        return self.rank == 0

    def progress(self, what: str, **where: Any) -> None:
        """Tell the launcher's hang watchdog and the CLI's display (artifact/launch/progress.py)
        this rank is alive, and where: rank 0 writes OUT/logs/<figure>.progress, JSON with
        `what` and the `where` fields given so far (config_k, config_n, config_id, rep_k,
        rep_n, phase, phase_k, phase_n). A new step, or new fields, is written at once; the
        iterations of one step at most every few seconds (the file is fsynced)."""
        if not self.is_writer:
            return
        self.where |= where
        now, step = time.monotonic(), re.sub(r"\d+", "#", what)
        if not where and step == self._last_step and now - self._last_progress < PROGRESS_EVERY_S:
            return
        self._last_progress, self._last_step = now, step
        beacon = json.dumps({"what": what, **self.where})
        atomic_write_text(self.store.root / "logs" / f"{self.figure}.progress", beacon)

    def rep_fields(self, rep: int) -> dict[str, Any]:
        """The beacon's repetition fields: repetition k of the decided n; while an adaptive
        configuration's pilot runs, of up to the maximum (`rep_upto`)."""
        upto = {"rep_upto": self.decided is None} if self.options.adaptive else {}
        return {"rep_k": rep + 1, "rep_n": self.decided or self.reps, **upto}

    def record_extra(self) -> dict[str, Any]:
        """What every record of an adaptive configuration notes: its decision is on disk."""
        if not self.options.adaptive:
            return {}
        return {"adaptive": {"max_reps": self.reps, "decision": f"../{STOPPING}"}}

    def barrier(self) -> None:
        if emulation.has_peers():
            dist.barrier()
        synchronize(self.device)


def broadcast(obj: Any) -> Any:
    if not emulation.has_peers():  # alone, or rank 0 of an emulated world
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def gather(obj: Any) -> list[Any]:
    """Every rank's `obj`, on every rank (rank 0's alone under emulation: no peers)."""
    if not emulation.has_peers():
        return [obj]
    out: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(out, obj)
    return out


class ConfigPoint(NamedTuple):
    """One configuration of a sweep: its id (the records' folder), the settings every
    record carries, and the workload's own spec (FsdpSpec, PipelineSpec, MicrobenchSpec)."""

    config_id: str
    config: dict[str, Any]
    spec: Any


def log_repetition(ctx: RunContext, config_id: str, rep: int, results: dict) -> None:
    """Rank 0's line a repetition, for the log file (the console shows the digest)."""
    if not ctx.is_writer:
        return
    over, seq = results["overlap"], results["sequential"]
    mfu = f", MFU {over['mfu']:.3f}" if "mfu" in over else ""
    log.info(
        "%s rep %d/%d: overlap %.3f ms, sequential %.3f ms%s",
        *(config_id, rep + 1, ctx.decided or ctx.reps, over["e2e_ms"], seq["e2e_ms"], mfu),
    )


class StopRequested(Exception):
    """The user pressed Ctrl-C once: stop at a repetition boundary, everything finished kept."""


def stop_requested(ctx: RunContext) -> None:
    """Raise StopRequested on every rank when the CLI asked to stop (a first Ctrl-C writes
    OUT/logs/<figure>.stop); checked between repetitions, so none is left half-measured."""
    asked = (ctx.store.root / "logs" / f"{ctx.figure}.stop").exists() if ctx.is_writer else None
    if broadcast(asked):
        raise StopRequested()


def record_not_run(ctx: RunContext, config_id: str, reason: str) -> None:
    """A configuration that cannot run here: logged, and recorded in the figure's status."""
    log.warning("%s: not run: %s", config_id, reason)
    if ctx.is_writer:
        ctx.store.write_config_status(ctx.figure, config_id, "not run", reason)


def check_gpu_alone(ctx: RunContext) -> None:
    """After each configuration: no other job has started on our GPUs meanwhile (its
    load would enter every number). Every rank looks at its own GPU and all agree."""
    ours = set(gather(os.getpid()))
    gpu = {ctx.gpu_index: ctx.power_backend}
    mine = procs.other_gpu_processes(gpu, ours, visible_only=True)
    found = [p for rank in gather(mine) for p in rank]
    procs.refuse_shared(found, allow=os.environ.get(procs.ALLOW_SHARED_ENV) == "1")
