"""Fig. 10: FP32 vs FP16 on slowdown and power (BF16 as an extra row), FSDP.

The first model x the preset's first micro-batch, in each precision
(artifact/experiments/precision_sweep.py). Where fig4 ran its FSDP row of the same
size into the same folder (the main precision), fig10 copies those records
(FigureSpec.reuses).
"""

from artifact.core.emulated import EMULATION_OPTIONS
from artifact.figures import derived
from artifact.figures.spec import TRAINING_OPTIONS, FigureSpec, Panel, Series

SPEC = FigureSpec(
    name="fig10",
    title="Fig. 10: numeric precision, compute slowdown and peak power",
    experiment="precision_sweep",
    params={"precisions": ("fp32", "fp16", "bf16")},
    reuses="fig4",  # its row in the main precision is fig4's FSDP row of that size
    options=TRAINING_OPTIONS | EMULATION_OPTIONS,
    derived=derived.TRAINING,
    panels=(
        derived.SLOWDOWN_PANEL,
        Panel(
            (
                Series("overlap", "power_peak_pct_tdp", "peak, overlap"),
                Series("sequential", "power_peak_pct_tdp", "peak, sequential"),
            ),
            "peak power (% of TDP)",
        ),
    ),
    expected="fig10.yaml",
)
