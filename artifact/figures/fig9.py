"""Fig. 9: power capping and performance (the paper: A100 x4, caps 300 W down to 100 W).

Fig. 8's microbenchmark uncapped and under each cap, the paper's caps mapped onto this
GPU's allowed range. Capping changes the machine: only with --allow-power-cap;
otherwise not run, with the limits read and the caps it would have set.
"""

from artifact.figures import derived
from artifact.figures.spec import MICROBENCH_OPTIONS, FigureSpec, Panel, Series

SPEC = FigureSpec(
    name="fig9",
    title="Fig. 9: iteration time under power caps",
    experiment="fig9",
    options=MICROBENCH_OPTIONS | {"allow_power_cap"},
    derived=derived.MICROBENCH,
    panels=(
        Panel(
            (
                Series("overlap", "e2e_ms", "overlapped"),
                Series("sequential", "e2e_ms", "sequential"),
            ),
            "iteration time (ms)",
        ),
    ),
    caps_power=True,
    expected="fig9.yaml",
)
