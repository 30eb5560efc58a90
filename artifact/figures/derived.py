"""Derived quantities shared by several figures (summary.csv's 'derived' rows), and
the panel that plots Eq. 1.

Eq. 1 is `slowdown` everywhere: compute time under overlap vs sequential.
"""

from __future__ import annotations

from artifact.analyze import metrics as eq
from artifact.analyze.aggregate import MODE_DERIVED, Derived, relative_change
from artifact.figures.spec import Panel, Series

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
