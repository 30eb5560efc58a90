"""Fig. 8: power and performance of an all-reduce (1 GiB in the paper) concurrent with a matmul.

Per configuration: the matmul's slowdown under overlap (Eq. 1), the communication's
slowdown, all-reduce bandwidth, E2E overlapped and sequential, Eq. 4's ideal and
ConCCL's max-ideal, the sequential penalty and V1. With one GPU the all-reduce moves no
data, so two labelled proxies run beside it (artifact/experiments/fig8.py).
"""

from artifact.figures import derived
from artifact.figures.spec import MICROBENCH_OPTIONS, FigureSpec, Panel, Series

SPEC = FigureSpec(
    name="fig8",
    title="Fig. 8: a matmul beside an all-reduce (1 GiB in the paper)",
    experiment="fig8",
    options=MICROBENCH_OPTIONS | {"colocate", "comm_ctas"},
    derived=derived.MICROBENCH,
    reuses="fig6",  # the same configurations, measured first for fig6 where it runs (a GPU)
    panels=(
        Panel(
            (
                Series("derived", "slowdown", "matmul slowdown (Eq. 1)"),
                Series("derived", "comm_slowdown", "communication slowdown"),
            ),
            "slowdown (%)",
            percent=True,
        ),
    ),
    expected="fig8.yaml",
)
