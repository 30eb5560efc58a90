"""The phases of a repetition, declared once and torch-free (docs/design.md section 3):
the experiments run them (artifact.rank.modes routes their collectives), the plan's cost model
prices them (artifact/estimate/model.py), and neither copies the other's lists.

A phase is a mode measured under a name:
- the modes `overlap`, `sequential`, `nocomm`;
- `overlap_repeat`: OVERLAP measured a second time in the same repetition (the A/A
  check behind the noise floor, docs/measurement.md "Noise floor");
- `overlap_control` and `sequential_control`: their mode's code path with every
  collective on zero bytes, the negative controls where collectives move data;
- the microbenchmark's `comm_alone` (the collectives alone), and fig7's blocks.
Phases run in the order of a Williams design (`balanced_order`).
"""

from __future__ import annotations

from enum import StrEnum


class Mode(StrEnum):
    OVERLAP = "overlap"
    SEQUENTIAL = "sequential"
    NOCOMM = "nocomm"


# The A/A check: the overlap mode measured again in the same repetition. Eq. 1 between
# the two overlap passes is the noise floor (figures.derived.MODE_DERIVED "noise_floor").
OVERLAP_REPEAT = "overlap_repeat"
# The negative controls: the overlap and sequential code paths moving zero bytes.
OVERLAP_CONTROL = "overlap_control"
SEQUENTIAL_CONTROL = "sequential_control"
CONTROL_PHASES = (OVERLAP_CONTROL, SEQUENTIAL_CONTROL)
PHASE_MODES = {
    OVERLAP_REPEAT: Mode.OVERLAP,
    OVERLAP_CONTROL: Mode.OVERLAP,
    SEQUENTIAL_CONTROL: Mode.SEQUENTIAL,
}


def mode_of(phase: str) -> Mode:
    """The mode a phase runs in: its own name, or the mode it repeats or controls."""
    return PHASE_MODES.get(phase) or Mode(phase)


def moves_zero_bytes(phase: str) -> bool:
    """Whether the phase's collectives are the zero-byte stand-ins of a control."""
    return phase in CONTROL_PHASES


def with_repeat(phases: tuple[str, ...]) -> tuple[str, ...]:
    """`phases` and the A/A repeat of overlap (where it runs is the design's business)."""
    return (*phases, OVERLAP_REPEAT)


def with_controls(phases: tuple[str, ...]) -> tuple[str, ...]:
    """`phases` and the two zero-byte controls (configurations that move data)."""
    return (*phases, *CONTROL_PHASES)


def williams_rows(n: int) -> list[list[int]]:
    """A Williams design for n treatments: rows (orders) in which every treatment follows
    every other equally often (once over n rows for even n, over 2n rows for odd n)."""
    first, lo, hi = [0], 1, n - 1
    while len(first) < n:
        first.append(lo)
        lo += 1
        if len(first) < n:
            first.append(hi)
            hi -= 1
    rows = [[(x + i) % n for x in first] for i in range(n)]
    return rows if n % 2 == 0 else rows + [row[::-1] for row in rows]


def balanced_order(phases: tuple[str, ...], rep: int) -> tuple[str, ...]:
    """Repetition `rep`'s phase order: row `rep` of a Williams design over `phases`, so
    over a full cycle each phase runs first equally often and follows every other phase
    equally often (a phase's carry-over, a hot GPU after overlap, falls on every other)."""
    rows = williams_rows(len(phases))
    return tuple(phases[i] for i in rows[rep % len(rows)])


# artifact/experiments/training.py: the three modes and the A/A repeat of overlap
TRAINING_MODES = (Mode.OVERLAP.value, Mode.SEQUENTIAL.value, Mode.NOCOMM.value)
TRAINING_PHASES = with_repeat(TRAINING_MODES)
# artifact/workloads/microbench.py: the microbenchmark's own phases (the A/A repeat is
# added where the figure derives Eq. 1's noise floor, FigureSpec.runs_noise_floor)
MICROBENCH_PHASES = ("nocomm", "comm_alone", "sequential", "overlap")
# artifact/experiments/fig7.py: one profiled window, the phases in blocks
FIG7_BLOCKS = ("overlap", "nocomm", "comm_alone", "sequential")
FIG7_MIN_BLOCK_S = 0.5


def training_phases(world_size: int) -> tuple[str, ...]:
    """A training repetition's phases: with several ranks the collectives move data and
    the zero-byte controls run beside the modes; with one, overlap and sequential move
    nothing and are their own controls."""
    return with_controls(TRAINING_PHASES) if world_size > 1 else TRAINING_PHASES


def microbench_phases(noise_floor: bool, moves_data: bool) -> tuple[str, ...]:
    """A microbenchmark repetition's phases: + the A/A repeat where the figure derives
    the noise floor, + the controls where its all-reduce moves data between GPUs."""
    phases = with_repeat(MICROBENCH_PHASES) if noise_floor else MICROBENCH_PHASES
    return with_controls(phases) if moves_data else phases
