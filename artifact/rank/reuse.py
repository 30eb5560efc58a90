"""Records of one configuration copied from the figure that measured it first in the same
output folder (FigureSpec.reuses: fig8 copies fig6's, fig10's FP16 row is fig4's FSDP
row, fig11's FP32 rows are fig10's), so nothing is measured twice."""

from __future__ import annotations

import logging

from artifact.figures import spec_of
from artifact.rank.context import ConfigPoint, RunContext, broadcast
from artifact.rank.schedule import stored_n
from artifact.store import atomic_write, dump_json, read_record

log = logging.getLogger(__name__)


def reuse(ctx: RunContext, point: ConfigPoint, phases: tuple[str, ...]) -> bool:
    """Whether `point` was measured already for the figure this one reuses: every phase
    of every repetition on disk there, with the same settings. Rank 0 then copies those
    records here, each marked `reused_from` and noted, and nothing is measured again."""
    source = spec_of(ctx.figure).reuses
    found = ctx.is_writer and source is not None and _reusable(ctx, source, point, phases)
    if not broadcast(found):
        return False
    if ctx.is_writer:
        for rep in range(_reps(ctx, source, point.config_id)):
            for phase in phases:
                if not ctx.store.has(ctx.figure, point.config_id, phase, rep):
                    _copy_record(ctx, source, point.config_id, phase, rep)
        decision = ctx.store.read_stopping(source, point.config_id)
        if ctx.options.adaptive and decision:  # its repetitions were decided there
            ctx.store.write_stopping(ctx.figure, point.config_id, decision)
    log.info("%s: measured for %s; its records copied", point.config_id, source)
    return True


def _reps(ctx: RunContext, source: str, config_id: str) -> int:
    """The source's repetitions: under --adaptive, those its decision gave it for the same
    maximum (stopping.json); else the plan's."""
    return (ctx.options.adaptive and stored_n(ctx, config_id, source)) or ctx.reps


def _reusable(ctx: RunContext, source: str, point: ConfigPoint, phases: tuple[str, ...]) -> bool:
    paths = [
        ctx.store.record_path(source, point.config_id, phase, rep)
        for rep in range(_reps(ctx, source, point.config_id))
        for phase in phases
    ]
    if not all(p.is_file() for p in paths):
        return False
    seen = read_record(paths[0])
    same = {k: v for k, v in point.config.items() if k != "note"}
    return seen["provenance"].get("preset") == ctx.preset.name and all(
        seen["config"].get(k) == v for k, v in same.items()
    )


def _copy_record(ctx: RunContext, source: str, config_id: str, phase: str, rep: int) -> None:
    record = read_record(ctx.store.record_path(source, config_id, phase, rep))
    note = f"measured for {source} (the same configuration): its records"
    record["figure"] = ctx.figure
    record["reused_from"] = source
    record["config"]["note"] = "; ".join(n for n in (record["config"].get("note"), note) if n)
    path = ctx.store.record_path(ctx.figure, config_id, phase, rep)
    atomic_write(path, lambda f: dump_json(record, f))
