"""Fig. 7: a power trace normalised to TDP, split by what the kernels were doing.

Fig. 8's microbenchmark in blocks (overlap, compute alone, communication alone,
sequential) while the sampler polls; every sample is labelled with the kernel timeline's
state. The report plots repetition 0's labelled trace (OUT/traces/fig7/).
"""

from artifact.figures.spec import MICROBENCH_OPTIONS, FigureSpec

SPEC = FigureSpec(
    name="fig7",
    title="Fig. 7: GPU power over time by kernel state",
    experiment="fig7",
    options=MICROBENCH_OPTIONS,
    expected="fig7.yaml",
)
