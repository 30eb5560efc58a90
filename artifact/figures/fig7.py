"""Fig. 7: a power trace normalised to TDP, split by what the kernels were doing.

Fig. 8's microbenchmark in blocks (overlap, compute alone, communication alone,
sequential) while the sampler polls; every sample is labelled with the kernel timeline's
state. The report plots repetition 0's labelled trace (OUT/traces/fig7/). The claim is
judged on the blocks' counter power, the overlap block minus the compute-alone block of
the same repetition (`overlap_block_power_gap`, percentage points of TDP).
"""

from artifact.figures.spec import MICROBENCH_OPTIONS, Derived, FigureSpec

BLOCK_GAP = Derived(
    "overlap_block_power_gap",
    lambda overlap, alone: overlap - alone,
    (("trace", "block_overlap_pct_tdp"), ("trace", "block_nocomm_pct_tdp")),
    "%",
)

SPEC = FigureSpec(
    name="fig7",
    title="Fig. 7: GPU power over time by kernel state",
    experiment="fig7",
    options=MICROBENCH_OPTIONS,
    derived=(BLOCK_GAP,),
    needs_telemetry=True,
    power_trace=True,
    expected="fig7.yaml",
)
