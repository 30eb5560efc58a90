"""Estimate the `paper` preset's wall time, per-GPU memory and disk (artifact.plan).

A thin wrapper kept for its old name: `python -m artifact plan --preset paper` (or
`nox -s plan -- --preset paper --gpus 4 --gpu-memory-gib 80`) prints the same, one row a
configuration, with the methods stated. Training steps cost 6 x parameters x tokens
FLOPs at the TFLOP/s measured on one H200 (results/h200x1/all-quick), with no
communication cost added (a lower bound on several GPUs); memory is artifact.estimate.memory's
estimate, within 20 % of every peak measured on the H200 (tests/test_memory.py).

    python benchmarks/paper_estimate.py [--gpus 4] [--gpu-memory-gib 80] [--json]
"""

from __future__ import annotations

import sys

from artifact import plan

if __name__ == "__main__":
    sys.exit(plan.main(["--preset", "paper", "--gpus", "4", *sys.argv[1:]]))
