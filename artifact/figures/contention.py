"""Beyond the paper: the contention map (communication size x compute kind x mechanism).

Fig. 8's microbenchmark swept over the preset's collective sizes and compute kinds (bf16 /
fp16 / tf32 / fp32 GEMMs, an elementwise add), with NCCL's default and limited CTA counts
on several GPUs, or on one GPU the one-rank kernel, a copy, and at 1 GiB what holds
compute back (SMs held, the NCCL-shaped stand-in, co-located NCCL ranks:
artifact.core.mechanisms). The report draws it as heat maps and a mechanism table
(its report_sections below).
"""

from artifact.figures import derived
from artifact.figures.spec import FigureSpec

SPEC = FigureSpec(
    name="contention",
    title="Contention map (beyond the paper)",
    experiment="contention",
    options=frozenset(
        {"precision", "comm_bytes", "power_interval_s", "adaptive", "colocate", "comm_ctas", "axes"}
    ),
    derived=derived.MICROBENCH,
    in_paper=False,
    default_reps=lambda preset: preset.contention.reps,
    colocates_nccl_ranks=True,  # its one-GPU map times co-located NCCL ranks
    report_sections=("contention map", "what holds compute back", "what frees the compute"),
    checks=("stand-in matches co-located NCCL",),
    why_not={
        "matmul_size": "--matmul-size does not apply to contention (each compute kind has "
        "its size); narrow the sweep with --precision or --comm-mib"
    },
)
