"""Validation V2 (docs/design.md section 3): inject a known delay into communication.

Eq. 4's ideal E2E is derived, never measured, so the paper cannot show it means what it
says. Here Fig. 8's microbenchmark runs at several delays d: after every collective the
communication chain waits d before the next may start (artifact.workloads.microbench),
while the compute chain is untouched. The collective's count is the delay-free one at
every d, and the delay actually injected is read from the trace (`delay_ms`). Each d is
one configuration with all four phases, so it carries the usual derived quantities, and
the report checks the predictions across delays (artifact.judge.validation):
- sequential E2E rises by exactly the injected delay (slope 1: nothing hides it);
- overlapped E2E follows the overlap model max(compute chain, communication chain): once
  communication plus delay outlasts the compute, it rises one for one with the delay;
- Eq. 4's ideal moves by dE2E_overlap - dComputeOverlap (its definition), and is set
  against the no-contention bound max(compute alone, communication alone + delay).
"""

from __future__ import annotations

import logging

from artifact.experiments import configs_of, fig8
from artifact.figures.sweeps import Where
from artifact.rank.runner import ConfigPoint, RunContext, broadcast
from artifact.workloads.microbench import Microbench, MicrobenchSpec

log = logging.getLogger(__name__)

V2_NOTE = "V2: a known delay after every collective on the communication chain"


def run(ctx: RunContext) -> None:
    # the sweep (artifact.figures.sweeps.v2): Fig. 8's configuration whose collective
    # occupies the device here, once a delay; the delay is set below, from the compute
    points = configs_of(ctx)
    _, config, spec = fig8.config_point(Where.of(ctx), points[0])
    probe = Microbench(spec, ctx.device, seed=ctx.rank)
    repeats = probe.calibrate(ctx.warmup)
    # every rank injects the same delay: rank 0's compute time decides
    t_compute_s = broadcast(probe.t_compute_s)
    probe.close()
    del probe
    configs = []
    for point in points:
        fraction = point.delay_fraction
        delay_us = fraction * t_compute_s * 1e6 / repeats
        delayed = MicrobenchSpec(**{**spec.__dict__, "delay_us": delay_us})
        configs.append(
            ConfigPoint(
                point.config_id,
                {
                    **config,
                    "delay_fraction": fraction,
                    "delay_us_per_collective": delay_us,
                    "note": "; ".join(n for n in (config["note"], V2_NOTE) if n),
                },
                delayed,
            )
        )
        log.info("V2: delay %.3g x compute = %.1f us after each collective", fraction, delay_us)
    fig8.run_configs(ctx, configs, repeats=repeats, power_window_of=lambda config: 0.0, timed_s=0.0)
