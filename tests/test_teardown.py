"""A configuration's trainer gives back its memory before the next one is built.

On an H200, fig10's third DeepSpeed configuration started with 47 GiB of earlier
engines still allocated: DeepSpeed 0.19.8 keeps module-level references that
engine.destroy() leaves behind. Checked here by counting live models after close().
"""

import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT, free_port

SCRIPT = """
import gc, os, torch, torch.distributed as dist
os.environ.update(MASTER_ADDR="127.0.0.1", RANK="0", LOCAL_RANK="0", WORLD_SIZE="1")
dist.init_process_group("gloo")
from artifact.core.config import get_model
from artifact.rank.modes import Mode
from artifact.workloads.fsdp_deepspeed import FsdpSpec, FsdpTrainer
from artifact.workloads.models import DecoderLM
for _ in range(2):
    t = FsdpTrainer(FsdpSpec(get_model("gpt-tiny"), 2, "fp32"), torch.device("cpu"), 0)
    for m in Mode:
        t.step(m)
    t.close()
    del t
    gc.collect()
    print("live models:", sum(isinstance(o, DecoderLM) for o in gc.get_objects()))
"""


@pytest.mark.slow
def test_closed_deepspeed_trainer_leaves_no_model_alive():
    res = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        cwd=ROOT,
        env={**os.environ, "MASTER_PORT": str(free_port())},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    assert [ln for ln in res.stdout.splitlines() if ln.startswith("live")] == [
        "live models: 0",
        "live models: 0",
    ]
