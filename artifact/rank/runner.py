"""The per-rank measurement loop every experiment shares (docs/design.md sections 3 and 5).

For one phase (a mode, or an isolated-communication run) of one repetition:
  1. settle: the phase's own work runs until its step time and the SM clock are steady
     (bounded), so no phase inherits the previous one's power state;
  2. the timed pass: at least N iterations and S seconds (the preset's), queued back to
     back after one barrier and each timed between marks on the current stream (CUDA
     events; the host clock on a CPU), under the power sampler where there is telemetry,
     so the device never waits for the host; E2E of an iteration is the slowest rank's time,
     E2E of the phase the median iteration, with the count of outlying iterations. A
     workload's meter times its own spans over the same pass (the microbenchmark's
     compute, by CUDA events: a second of matmuls, not the profiler's tenth);
  3. the profiled pass: `iters` iterations under torch.profiler, each marked, parsed into
     the kernel table: per-iteration compute / communication / memory time and the overlap
     fraction. Timing and profiling are separate so profiler overhead never reaches E2E.
Training times its phases together instead, in interleaved rounds (1 and 2 for every
phase at once: `interleaved_timed_pass`, `round_adjusted`), then profiles each (3).
Ranks' numbers are gathered on rank 0, which alone writes records.

The loop lives in one module a job: context.py (the rank's context, the collectives
between ranks), schedule.py (which repetitions are left: resume, --adaptive), timed.py
(settling, the timed pass, interleaved rounds), profiled.py (the profiled pass) and
repetition.py (one repetition: its Settings, the ranks reduced, the records written).
This module names them for the experiments (`from artifact.rank.runner import ...`).
"""

from artifact.rank.context import (  # noqa: F401 (named here for the experiments)
    PROGRESS_EVERY_S,
    ConfigPoint,
    RunContext,
    StopRequested,
    broadcast,
    check_gpu_alone,
    gather,
    log_repetition,
    record_not_run,
    stop_requested,
)
from artifact.rank.profiled import (  # noqa: F401 (named here for the experiments)
    _export_trace,
    profiled_name,
    profiled_pass,
    profiler_activities,
)
from artifact.rank.repetition import (  # noqa: F401 (named here for the experiments)
    BASE_UNITS,
    GIB,
    MAX_OVER_RANKS,
    POWER_UNITS,
    Settings,
    measure_phase,
    measure_repetition,
    reduce_ranks,
)
from artifact.rank.schedule import (  # noqa: F401 (named here for the experiments)
    adaptive_todo,
    decide,
    pending,
    rep_done,
    stored_n,
)
from artifact.rank.timed import (  # noqa: F401 (named here for the experiments)
    COUNTER_TAIL_S,
    Meter,
    interleaved_timed_pass,
    outliers,
    round_adjusted,
    rounds_precise,
    settle,
    settle_rounds,
    timed_iterations,
    timed_pass,
)
