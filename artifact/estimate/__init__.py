"""What a run will cost before it starts (no torch): the cost model (model.py) and its
calibration data (reference.py, reading artifact/data/reference.json). The `plan`
command (artifact/plan.py) renders it; the report prices the paper preset with it."""

from artifact.estimate.model import Row, build, figures_of, totals

__all__ = ["Row", "build", "figures_of", "totals"]
