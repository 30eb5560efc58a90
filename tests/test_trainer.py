"""The three training workloads offer the experiments one interface (workloads/trainer.py)."""

import inspect

import pytest

from artifact.workloads.trainer import Trainer


@pytest.mark.parametrize(
    "module, name",
    [
        ("artifact.workloads.fsdp_deepspeed", "FsdpTrainer"),
        ("artifact.workloads.fsdp2", "Fsdp2Trainer"),
        ("artifact.workloads.pipeline_megatron", "PipelineTrainer"),
    ],
)
def test_every_trainer_has_the_protocols_methods(module, name):
    cls = getattr(pytest.importorskip(module), name)
    for method in ("step", "model_flops_per_step", "close"):
        want = list(inspect.signature(getattr(Trainer, method)).parameters)
        assert list(inspect.signature(getattr(cls, method)).parameters) == want, (cls, method)
    assert "self.params =" in inspect.getsource(cls.__init__)
