"""What every training workload offers the experiments (artifact/experiments/training.py):
DeepSpeed ZeRO-3 (fsdp_deepspeed.FsdpTrainer), torch FSDP2 (fsdp2.Fsdp2Trainer) and the
Megatron-core pipeline (pipeline_megatron.PipelineTrainer)."""

from __future__ import annotations

from typing import Any, Protocol


class Trainer(Protocol):
    """One configuration's model, built on every rank, stepped in a mode (artifact.rank.modes)."""

    params: int  # the model's parameters (all ranks together)

    def step(self, phase: str) -> Any:
        """One training step in `phase` (a mode, or its repeat or control): the loss on ranks
        that compute it, None on the others (a pipeline's earlier stages)."""
        ...

    def model_flops_per_step(self, world_size: int) -> float:
        """The model's FLOPs in one step over all ranks (MFU's numerator)."""
        ...

    def close(self) -> None:
        """Release what the trainer holds (engines, process groups, memory)."""
        ...
