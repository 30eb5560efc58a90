"""Fig. 4: computation slowdowns across GPUs for various models.

Runs the preset's models x micro-batches in its main precision (FP16 on GPUs, as the
paper; FP32 on CPU), under FSDP (DeepSpeed ZeRO-3) and pipeline (Megatron-core 1F1B),
each in the overlap, sequential and nocomm modes (artifact/experiments/fig4.py).
Fig. 5's end-to-end times come from the same records.
"""

from artifact.core.emulated import EMULATION_OPTIONS
from artifact.figures import derived
from artifact.figures.spec import TRAINING_OPTIONS, FigureSpec

SPEC = FigureSpec(
    name="fig4",
    title="Fig. 4: compute slowdown under overlap",
    experiment="fig4",
    options=TRAINING_OPTIONS | EMULATION_OPTIONS | {"parallelisms"},
    derived=derived.TRAINING,
    panels=(derived.SLOWDOWN_PANEL,),
    expected="fig4.yaml",
)
