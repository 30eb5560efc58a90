"""Fig. 11: FP32 with and without TF32 tensor cores, FSDP.

Its FP32 configuration is fig10's: measured once where both figures run into one folder
(FigureSpec.reuses). On CPUs TF32 does not exist: both rows run the same FP32 arithmetic (a functional check).
"""

from artifact.core.emulated import EMULATION_OPTIONS
from artifact.figures import derived
from artifact.figures.spec import TRAINING_OPTIONS, FigureSpec

SPEC = FigureSpec(
    name="fig11",
    title="Fig. 11: TF32 tensor cores, compute slowdown",
    experiment="precision_sweep",
    params={"precisions": ("fp32", "tf32")},
    reuses="fig10",  # its FP32 rows are fig10's FP32 rows
    options=TRAINING_OPTIONS | EMULATION_OPTIONS,
    derived=derived.TRAINING,
    panels=(derived.SLOWDOWN_PANEL,),
    expected="fig11.yaml",
)
