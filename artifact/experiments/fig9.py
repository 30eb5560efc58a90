"""Fig. 9: power capping and performance (the paper: A100 x4, caps 300 W down to 100 W).

The microbenchmark of Fig. 8 runs uncapped and then under each cap; the paper's A100
caps are mapped onto this GPU's allowed range (caps.scaled_cap_levels). Capping
changes the machine, so it runs only with --allow-power-cap; without it the figure
is recorded as "not run" with the limits it read and the caps it would have set, and
nothing is changed. Each rank caps its own GPU and restores it (artifact.measure.caps).
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any

from artifact.core.errors import ArtifactError
from artifact.experiments import configs_of, fig8
from artifact.figures.sweeps import PAPER_CAPS_W, PAPER_RANGE_W, Where
from artifact.measure import caps
from artifact.rank.runner import ConfigPoint, RunContext

log = logging.getLogger(__name__)


def _status(ctx: RunContext, status: str, reason: str, **details: Any) -> None:
    if ctx.is_writer:
        ctx.store.write_status(ctx.figure, status, reason, **details)
    log.info("fig9: %s (%s)", status, reason)


def _at_level(base: list[ConfigPoint], level: float | None, setter: str) -> list[ConfigPoint]:
    """Fig. 8's configurations under one cap (None: uncapped; the sweep tags their ids)."""
    fake_note = "cap applied by a fake setter: no physical effect" if setter == "fake" else ""
    return [
        ConfigPoint(
            cid,
            {
                **cfg,
                "power_cap_w": level,
                "cap_setter": setter,
                "note": "; ".join(n for n in (cfg["note"], fake_note if level else "") if n),
            },
            spec,
        )
        for cid, cfg, spec in base
    ]


def run(ctx: RunContext) -> None:
    allowed = bool(ctx.options.allow_power_cap)
    index = ctx.gpu_index
    limit, rng = ctx.power_backend.power_limit_w(), ctx.power_backend.limit_range_w()
    try:  # opening changes nothing; a machine with no power control says so, flag or not
        setter = caps.open_setter(index)
    except ArtifactError as e:
        _status(ctx, "not run", str(e))
        return
    if not allowed:
        planned = (
            caps.scaled_cap_levels(PAPER_CAPS_W, PAPER_RANGE_W, rng) if rng[1] == rng[1] else []
        )
        _status(
            ctx,
            "not run",
            caps.NEEDS_PERMISSION,
            limit_w=limit,
            range_w=rng,
            planned_caps_w=planned,
        )
        return
    rng = setter.limit_range_w()
    levels = caps.scaled_cap_levels(PAPER_CAPS_W, PAPER_RANGE_W, rng)
    where = Where.of(ctx, cap_levels=tuple(levels))
    points = configs_of(ctx, cap_levels=tuple(levels))  # artifact.figures.sweeps.fig9
    every = [None, *levels]  # one list of Fig. 8's configurations a level, numbered as one
    for k, level in enumerate(every):
        base = [fig8.config_point(where, p) for p in points if p.power_cap_w == level]
        guard = (
            contextlib.nullcontext()
            if level is None
            else caps.capped(
                [index],
                allowed=True,
                power_w=level,
                state_file=caps.default_state_file(f"gpu{index}"),
            )
        )
        with guard:
            numbered = (k * len(base), len(every) * len(base))
            fig8.run_configs(ctx, _at_level(base, level, setter.name), numbered=numbered)
    _status(
        ctx,
        "ran",
        f"caps applied with the {setter.name} setter",
        caps_w=levels,
        range_w=rng,
        setter=setter.name,
        original_limit_w=setter.power_limit_w(),
    )
