"""Beyond the paper: validation V2, a known delay injected after every collective.

Fig. 8's microbenchmark at several delays (fractions of the compute time): sequential
E2E must rise by the delay, overlapped E2E must follow max(compute, communication +
delay), and Eq. 4's ideal is set against the no-contention bound (artifact/judge/validation.py).
"""

from artifact.figures import derived
from artifact.figures.spec import MICROBENCH_OPTIONS, FigureSpec

SPEC = FigureSpec(
    name="v2",
    title="Validation V2: Eq. 4 under a known injected delay",
    experiment="v2",
    options=MICROBENCH_OPTIONS,
    derived=derived.MICROBENCH,
    in_paper=False,
    default_reps=lambda preset: preset.v2.reps,
    report_sections=("delay injection",),
    checks=("delay injection",),
)
