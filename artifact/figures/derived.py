"""Derived quantities shared by several figures (summary.csv's 'derived' rows), and
the panel that plots Eq. 1.

Eq. 1 is `slowdown` everywhere: compute time under overlap vs sequential.
"""

from __future__ import annotations

from artifact.core import equations as eq
from artifact.figures.spec import Derived, Panel, Series


def relative_change(metric: str, over: tuple[str, str], under: tuple[str, str]) -> Derived:
    """metric = (over - under) / under: Eq. 1 and every "increase" or "gap" derived here."""
    return Derived(metric, eq.slowdown, (over, under), "ratio")


# Derived quantities every experiment with overlap / sequential / nocomm modes reports,
# from the metric names runner.measure_phase and runner.measure_power record.
MODE_DERIVED = [
    Derived(
        "e2e_ideal_ms",
        eq.e2e_ideal,
        (("overlap", "e2e_ms"), ("overlap", "compute_ms"), ("sequential", "compute_ms")),
        "ms",
    ),
    Derived(
        "sequential_penalty",
        eq.sequential_penalty,
        (("sequential", "e2e_ms"), ("overlap", "e2e_ms")),
        "ratio",
    ),
    Derived(
        "e2e_above_ideal",
        lambda e2e_o, c_o, c_s: eq.slowdown_time(c_o, c_s) / eq.e2e_ideal(e2e_o, c_o, c_s),
        (("overlap", "e2e_ms"), ("overlap", "compute_ms"), ("sequential", "compute_ms")),
        "ratio",
    ),
    relative_change(
        "peak_power_increase", ("overlap", "power_peak_w"), ("sequential", "power_peak_w")
    ),
    relative_change(
        "mean_power_increase", ("overlap", "power_mean_w"), ("sequential", "power_mean_w")
    ),
    relative_change(
        "energy_per_iter_change",
        ("overlap", "energy_per_iter_j"),
        ("sequential", "energy_per_iter_j"),
    ),
    # V1: the sequential baseline's compute equals compute with no communication at all.
    relative_change("v1_baseline_gap", ("sequential", "compute_ms"), ("nocomm", "compute_ms")),
    # Eq. 1 against that other baseline: where V1 fails (a power-limited GPU runs
    # back-to-back compute slower than compute between communication gaps), the two differ.
    relative_change("slowdown_vs_nocomm", ("overlap", "compute_ms"), ("nocomm", "compute_ms")),
    # The A/A check: Eq. 1 between two identical overlap passes of one repetition
    # (modes.OVERLAP_REPEAT). What Eq. 1 reads when nothing differs between the passes
    # compared: a slowdown means something only where its CI clears this (artifact/analyze/noise.py).
    relative_change("noise_floor", ("overlap_repeat", "compute_ms"), ("overlap", "compute_ms")),
    # The negative controls (modes.CONTROL_PHASES, configurations that move data): Eq. 1
    # and the sequential penalty with every collective on zero bytes, which must read 0,
    # and the effects beyond them, paired by repetition (docs/measurement.md, "Controls").
    relative_change(
        "control_slowdown", ("overlap_control", "compute_ms"), ("sequential_control", "compute_ms")
    ),
    Derived(
        "control_penalty",
        eq.sequential_penalty,
        (("sequential_control", "e2e_ms"), ("overlap_control", "e2e_ms")),
        "ratio",
    ),
    Derived(
        "slowdown_beyond_control",
        lambda co, cs, kco, kcs: eq.slowdown(co, cs) - eq.slowdown(kco, kcs),
        (
            ("overlap", "compute_ms"),
            ("sequential", "compute_ms"),
            ("overlap_control", "compute_ms"),
            ("sequential_control", "compute_ms"),
        ),
        "ratio",
    ),
    Derived(
        "penalty_beyond_control",
        lambda es, eo, kes, keo: eq.sequential_penalty(es, eo) - eq.sequential_penalty(kes, keo),
        (
            ("sequential", "e2e_ms"),
            ("overlap", "e2e_ms"),
            ("sequential_control", "e2e_ms"),
            ("overlap_control", "e2e_ms"),
        ),
        "ratio",
    ),
]

SLOWDOWN = relative_change("slowdown", ("overlap", "compute_ms"), ("sequential", "compute_ms"))

# the training figures (FSDP, pipeline): Eq. 1 and the quantities of every mode set
TRAINING = (SLOWDOWN, *MODE_DERIVED)

# Fig. 8's microbenchmark and the experiments built on it: both sides can slow down, and
# ConCCL's ideal (the longer of compute alone and communication alone) is known
MICROBENCH = (
    SLOWDOWN,
    relative_change("comm_slowdown", ("overlap", "comm_role_ms"), ("comm_alone", "comm_role_ms")),
    Derived(
        "e2e_ideal_max_ms", eq.e2e_ideal_max, (("nocomm", "e2e_ms"), ("comm_alone", "e2e_ms")), "ms"
    ),
    *MODE_DERIVED,
)

POWER = tuple(d for d in MICROBENCH if "power" in d.metric or "energy" in d.metric)

# the training figures' plot of Eq. 1 (fig4, fig10, fig11), in % as the paper
SLOWDOWN_PANEL = Panel(
    (Series("derived", "slowdown", "compute slowdown (Eq. 1)"),),
    "compute slowdown (%)",
    percent=True,
)
