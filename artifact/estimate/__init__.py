"""What a run will cost before it starts (no torch): the cost model (model.py) and its
calibration data (reference.py, reading artifact/data/reference.json). The `plan`
command (artifact/plan.py) renders it; the report prices the paper preset with it.

Nothing is imported here: the figure registry reads memory.py, and the cost model reads
the registry (docs/design.md, "Layers": memory.py sits far below model.py)."""
