"""Fig. 6: power consumption under overlap vs sequential execution.

Fig. 8's microbenchmark, each phase held for the preset's power window: mean power from
the energy counter, peak from the instant field, both also as % of the enforced limit
(TDP), and the increases under overlap. Without telemetry: not run, saying why.
"""

from artifact.figures import derived
from artifact.figures.spec import MICROBENCH_OPTIONS, FigureSpec, Panel, Series

SPEC = FigureSpec(
    name="fig6",
    title="Fig. 6: GPU power, overlapped vs sequential",
    experiment="fig6",
    options=MICROBENCH_OPTIONS,
    derived=derived.POWER,
    needs_telemetry=True,
    panels=(
        Panel(
            (
                Series("overlap", "power_mean_pct_tdp", "mean, overlap"),
                Series("sequential", "power_mean_pct_tdp", "mean, sequential"),
                Series("overlap", "power_peak_pct_tdp", "peak, overlap"),
                Series("sequential", "power_peak_pct_tdp", "peak, sequential"),
            ),
            "% of TDP",
        ),
    ),
    expected="fig6.yaml",
)
