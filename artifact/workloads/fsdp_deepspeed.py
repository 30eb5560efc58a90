"""FSDP as the paper ran it: DeepSpeed ZeRO stage 3, one process a GPU (or gloo on CPU).

`overlap` is DeepSpeed's default ZeRO-3 schedule (parameter prefetch and overlap_comm);
`sequential` and `nocomm` keep the *same engine and configuration* and change only how
each collective runs (artifact.rank.modes routes DeepSpeed's torch.distributed calls), so
the three modes share the model, the data and the kernel list.

The optimizer is torch's AdamW handed to deepspeed.initialize: DeepSpeed's own Adam
builds a C++/CUDA op first (about 50 s on CPU), which would add a build step, not
measurement. Tokens are synthetic (artifact.workloads.models.synthetic_batch).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import torch

from artifact.core.config import ModelConfig
from artifact.core.errors import bad_choice
from artifact.core.options import FSDP_IMPLS
from artifact.estimate import memory
from artifact.rank.modes import collectives_for, install_collective_modes
from artifact.workloads.models import Block, DecoderLM, lm_loss, synthetic_batch
from artifact.workloads.precision import matmul_precision

log = logging.getLogger(__name__)

CLIP_NORM = 1.0  # gradient clipping, both implementations
INITIAL_SCALE_POWER = 12  # fp16: the dynamic loss scale starts at 2**12, both implementations
# ZeRO-3 gathers and releases each of these as one unit, with one pair of hooks, instead
# of hooking every Linear and norm inside it: the granularity FSDP2 shards at (one
# fully_shard per block). ZeRO-3's per-submodule hooks are host work the GPU waits for
# (docs/measurement.md, Workload settings: the MFU with and without). Empty: per submodule.
LEAF_MODULES: tuple[type, ...] = (Block,)


@dataclass(frozen=True)
class FsdpSpec:
    model: ModelConfig
    micro_batch: int
    precision: str
    recompute: bool = False  # activation recomputation: every block checkpointed
    impl: str = "deepspeed"  # "deepspeed" (ZeRO-3, the paper's) or "fsdp2" (torch's fully_shard)

    def __post_init__(self):
        if self.impl not in FSDP_IMPLS:
            raise bad_choice("FSDP implementation", self.impl, FSDP_IMPLS)

    def tokens_per_step(self, world_size: int) -> int:
        return self.micro_batch * self.model.seq_len * world_size


def deepspeed_config(spec: FsdpSpec) -> dict:
    """ZeRO-3 set for throughput with memory to spare (docs/measurement.md, Workload settings)."""
    m = spec.model
    block = memory.block_params(m)
    cfg = {
        "train_micro_batch_size_per_gpu": spec.micro_batch,
        "gradient_accumulation_steps": 1,
        "gradient_clipping": CLIP_NORM,
        "steps_per_print": 1 << 30,
        "zero_optimization": {
            "stage": 3,
            # gradient reduce-scatter on its own stream, beside the backward pass
            "overlap_comm": True,
            # gradients copied into one buffer as produced: no fragmentation
            "contiguous_gradients": True,
            # DeepSpeed's default: few, large reduce-scatters
            "reduce_bucket_size": memory.DEEPSPEED_REDUCE_BUCKET,
            # gather the next two blocks ahead of use (DeepSpeed's default, 5e7, is less
            # than one block from GPT-3 2.7B up)
            "stage3_prefetch_bucket_size": 2 * block,
            # biases and norm weights (<= 4 * hidden) stay whole: no tiny all-gathers
            "stage3_param_persistence_threshold": int(1e5),
            # keep gathered parameters while memory allows (DeepSpeed's defaults): no
            # re-gathers between the forward's last blocks and the backward's first
            "stage3_max_live_parameters": memory.DEEPSPEED_MAX_LIVE,
            "stage3_max_reuse_distance": memory.DEEPSPEED_MAX_REUSE,
        },
    }
    if spec.precision == "fp16":
        cfg["fp16"] = {"enabled": True, "initial_scale_power": INITIAL_SCALE_POWER}
    elif spec.precision == "bf16":
        cfg["bf16"] = {"enabled": True}
    return cfg


class FsdpTrainer:
    """A DeepSpeed ZeRO-3 engine on one rank; `step(phase)` runs one training step."""

    def __init__(self, spec: FsdpSpec, device: torch.device, rank: int, lr: float = 1e-3):
        install_collective_modes()  # before DeepSpeed keeps references to the collectives
        import deepspeed

        deepspeed.init_distributed(dist_backend="gloo" if device.type == "cpu" else "nccl")
        self.spec, self.device, self.rank = spec, device, rank
        config = deepspeed_config(spec)
        torch.manual_seed(1234)  # the same initial weights on every rank and in every run
        if device.type == "cuda":
            with deepspeed.zero.Init(config_dict_or_path=config):  # partitioned as built
                model = DecoderLM(spec.model, recompute=spec.recompute)
        else:
            model = DecoderLM(spec.model, recompute=spec.recompute)
        self.params = sum(getattr(p, "ds_numel", p.numel()) for p in model.parameters())
        if LEAF_MODULES:
            deepspeed.utils.set_z3_leaf_modules(model, list(LEAF_MODULES))
        optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
        self.engine, *_ = deepspeed.initialize(model=model, optimizer=optimizer, config=config)
        self.tokens = synthetic_batch(spec.model, spec.micro_batch, device, seed=rank)
        self.losses: list[float] = []

    def step(self, phase: str) -> torch.Tensor:
        with collectives_for(phase, self.device), matmul_precision(self.spec.precision):
            loss = lm_loss(self.engine(self.tokens), self.tokens)
            self.engine.backward(loss)
            self.engine.step()
        return loss.detach()

    def close(self) -> None:
        """Free the engine's partitions, gradients and optimizer states (before the next
        configuration: ZeRO-3 keeps them alive otherwise, and the next one ran out of memory)."""
        from deepspeed.runtime.zero import parameter_offload
        from deepspeed.runtime.zero.partitioned_param_coordinator import (
            PartitionedParameterCoordinator as Coordinator,
        )

        module = self.engine.module
        self.engine.destroy()
        # DeepSpeed 0.19.8 keeps two module-level references that destroy() leaves: the
        # top module on ZeRO-3's forward stack, and a class-level lru_cache keyed by
        # submodules. Both held every engine's parameters alive (measured on an H200: a
        # third configuration in one process started with 47 GiB still allocated).
        stack = parameter_offload.FWD_MODULE_STACK
        stack[:] = [m for m in stack if m is not module]
        nvtx_wrapper = Coordinator.__dict__["_PartitionedParameterCoordinator__params_to_release"]
        for cell in nvtx_wrapper.__closure__ or ():  # the lru_cache inside the NVTX wrapper
            if hasattr(cell.cell_contents, "cache_clear"):
                cell.cell_contents.cache_clear()
        del self.engine, self.tokens, module

    def model_flops_per_step(self, world_size: int) -> float:
        """6 * parameters * tokens: the MFU numerator (forward and backward, no recompute)."""
        return 6.0 * self.params * self.spec.tokens_per_step(world_size)
