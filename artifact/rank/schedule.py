"""Which repetitions a configuration still needs (docs/design.md sections 3 and 5):
resume by presence (a repetition whose every phase is on disk is skipped) and, under
--adaptive, the pilot first, then the repetitions rank 0 decides from it
(artifact.rank.adaptive; stopping.json)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator

from artifact.rank import adaptive
from artifact.rank.context import ConfigPoint, RunContext, broadcast

log = logging.getLogger(__name__)


def pending(
    ctx: RunContext,
    configs: list[ConfigPoint],
    phases: tuple[str, ...] | Callable[[ConfigPoint], tuple[str, ...]],
    numbered: tuple[int, int] | None = None,
) -> Iterator[tuple[ConfigPoint, Iterable[int]]]:
    """Each configuration with repetitions still to measure, and those repetitions; one
    whose every phase (`phases`, or `phases(point)`) of every repetition is on disk is
    skipped (a resumed run). With --adaptive the repetitions come lazily: the pilot's,
    then, once rank 0 has decided how many the configuration needs, the rest
    (adaptive_todo); a loop consumes them with `for rep in todo`. The
    progress beacon is told which configuration of how many is under way: of `configs`,
    or, for a figure that walks several lists (fig4: FSDP then pipeline), `numbered`
    = (configurations before this list, configurations of the figure)."""
    before, total = numbered or (0, len(configs))
    for k, point in enumerate(configs, before + 1):
        where = {"config_k": k, "config_n": total, "config_id": point.config_id}
        ctx.progress(f"{point.config_id}: set-up", **where, rep_k=None, phase=None, phase_k=None)
        mine = phases(point) if callable(phases) else phases
        ctx.decided = None
        todo = adaptive_todo(ctx, point.config_id, mine) if ctx.options.adaptive else None
        todo = _missing(ctx, point.config_id, mine, range(ctx.reps)) if todo is None else todo
        if todo:
            yield point, todo
        else:
            n = ctx.decided or ctx.reps
            log.info("%s: all %d repetitions on disk, skipped", point.config_id, n)


def _missing(ctx: RunContext, config_id: str, phases: tuple[str, ...], reps) -> list[int]:
    return [r for r in reps if not rep_done(ctx, config_id, phases, r)]


def adaptive_todo(ctx: RunContext, config_id: str, phases: tuple[str, ...]) -> Iterable[int]:
    """An adaptive configuration's repetitions still to run: a list where its decision
    is known (stopping.json, or a pilot already on disk: decided now), else the pilot's
    missing repetitions followed, lazily, by the decision and the rest."""
    n = broadcast(stored_n(ctx, config_id) if ctx.is_writer else None)
    if n is None and ctx.reps > adaptive.PILOT:
        pilot = _missing(ctx, config_id, phases, range(adaptive.PILOT))
        if pilot:
            return _pilot_then_rest(ctx, config_id, phases, pilot)
    ctx.decided = n or decide(ctx, config_id)
    return _missing(ctx, config_id, phases, range(ctx.decided))


def _pilot_then_rest(
    ctx, config_id: str, phases: tuple[str, ...], pilot: list[int]
) -> Iterator[int]:
    yield from pilot
    n = decide(ctx, config_id)
    yield from _missing(ctx, config_id, phases, range(adaptive.PILOT, n))


def stored_n(ctx: RunContext, config_id: str, figure: str | None = None) -> int | None:
    """The repetitions decided for `config_id` of `figure` (default: this run's) on disk;
    None where there is no decision, or it was for another maximum (an extended plan:
    decided again from the same pilot)."""
    decision = ctx.store.read_stopping(figure or ctx.figure, config_id)
    return decision["n"] if decision and decision.get("max") == ctx.reps else None


def decide(ctx: RunContext, config_id: str) -> int:
    """Rank 0 decides from the pilot's records and writes stopping.json; every rank gets
    the repetitions (an error on rank 0 stops every rank, none waits for a broadcast)."""
    got: int | str | None = None
    if ctx.is_writer:
        try:
            records = ctx.store.records(ctx.figure, config_id)
            decision = adaptive.decide(records, ctx.figure, ctx.reps)
            ctx.store.write_stopping(ctx.figure, config_id, decision)
            log.info("%s: %s", config_id, adaptive.shown(decision))
            got = decision["n"]
        except Exception as e:
            broadcast(f"{type(e).__name__}: {e}")
            raise
    got = broadcast(got)
    if isinstance(got, str):
        raise RuntimeError(f"rank 0 could not decide {config_id}'s repetitions: {got}")
    ctx.decided = int(got)
    return ctx.decided


def rep_done(ctx: RunContext, config_id: str, phases: tuple[str, ...], rep: int) -> bool:
    """Whether every phase of this repetition is on disk (rank 0 decides for all ranks)."""
    done = (
        all(ctx.store.has(ctx.figure, config_id, p, rep) for p in phases) if ctx.is_writer else None
    )
    return bool(broadcast(done))
