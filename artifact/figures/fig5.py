"""Fig. 5: end-to-end training iteration latency (overlapped, sequential, ideal).

Drawn from Fig. 4's records: the same runs, measured once. The ideal is Eq. 4, derived.
"""

from artifact.core.emulated import EMULATION_OPTIONS
from artifact.figures.spec import TRAINING_OPTIONS, FigureSpec, Panel, Series

SPEC = FigureSpec(
    name="fig5",
    title="Fig. 5: iteration time, overlapped vs sequential vs ideal",
    experiment=None,
    records_of="fig4",
    options=TRAINING_OPTIONS | EMULATION_OPTIONS | {"parallelisms"},
    panels=(
        Panel(
            (
                Series("overlap", "e2e_ms", "overlapped"),
                Series("sequential", "e2e_ms", "sequential"),
                Series("derived", "e2e_ideal_ms", "ideal (Eq. 4, derived)"),
            ),
            "iteration time (ms)",
        ),
    ),
    expected="fig5.yaml",
)
