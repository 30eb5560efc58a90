"""FSDP as torch ships it: FSDP2 (`torch.distributed.fsdp.fully_shard`), beside ZeRO-3.

The same models, data, optimizer and step as artifact.workloads.fsdp_deepspeed: every
transformer block is one FSDP2 unit and the root module (embeddings, final norm, head)
another. `overlap` is FSDP2's own schedule (all-gathers on their own stream, the next
block's issued ahead of use; reduce-scatters on their own stream beside the backward
pass); `sequential` and `nocomm` keep the same model and change only how each collective
runs.

How FSDP2's collectives reach the modes: torch 2.13's FSDP2 issues its all-gather and
reduce-scatter as `dist.all_gather_single(...)` / `dist.reduce_scatter_single(...)`
(torch.distributed.fsdp._fully_shard._fsdp_collectives, DefaultAllGather and
DefaultReduceScatter), torch 2.10's (the ROCm image's) as `dist.all_gather_into_tensor`
/ `dist.reduce_scatter_tensor`, looked up on the `torch.distributed` module at call time,
so the wrappers artifact.rank.modes installs there route them; both names are wrapped since
torch 2.13 renamed all_gather_into_tensor / reduce_scatter_tensor. Two calls would bypass
the modes and are avoided here: torch.nn.utils.clip_grad_norm_ on FSDP2's DTensor
gradients reduces the norm through functional collectives (c10d_functional), so the
norm is summed over the local shards and all-reduced with `dist.all_reduce`; the fp16
loss scaler (ShardedGradScaler) already all-reduces its overflow flag with
`dist.all_reduce`. tests/test_fsdp2.py checks with counters and a profiler trace that
no gloo collective runs in `nocomm` and that each one is waited for in `sequential`.

Precision as DeepSpeed runs it: FP32 master weights, gradients and Adam states sharded
(16 bytes a parameter, artifact.estimate.memory), compute and communication in the half
precision (param_dtype = reduce_dtype), fp16 with a dynamic loss scale from 2**12,
gradient clipping at 1.0.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from artifact.rank.modes import collectives_for, install_collective_modes
from artifact.workloads.fsdp_deepspeed import CLIP_NORM, INITIAL_SCALE_POWER, FsdpSpec
from artifact.workloads.models import DecoderLM, lm_loss, synthetic_batch
from artifact.workloads.precision import dtype_of, matmul_precision


def clip_grad_norm(grads: list[torch.Tensor], max_norm: float, device: torch.device) -> None:
    """Scale the local gradient shards so that the global norm is at most `max_norm`.

    The shards are disjoint, so the global squared norm is the sum over ranks of the local
    ones, all-reduced through `dist.all_reduce` (and so through the mode). The factor is
    DeepSpeed's: max_norm / (norm + 1e-6) where that is below 1."""
    local = [g for g in grads if g.numel()]
    sq = torch.zeros((), device=device, dtype=torch.float32)
    if local:
        sq = torch.stack([n.float() ** 2 for n in torch._foreach_norm(local, 2.0)]).sum()
    dist.all_reduce(sq)
    coef = (max_norm / (sq.sqrt() + 1e-6)).clamp(max=1.0)
    if local:
        torch._foreach_mul_(local, coef)


def shard(model: DecoderLM, precision: str) -> DecoderLM:
    """fully_shard every block, then the root (its parameters: embeddings, norm, head)."""
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    half = precision in ("fp16", "bf16")
    dtype = dtype_of(precision)
    policy = MixedPrecisionPolicy(param_dtype=dtype, reduce_dtype=dtype) if half else None
    kwargs = {"mp_policy": policy} if policy else {}
    for block in model.blocks:
        fully_shard(block, **kwargs)
    fully_shard(model, **kwargs)
    return model


def build(spec: FsdpSpec, device: torch.device, on_meta: bool) -> DecoderLM:
    """The sharded model with the same initial weights on every rank (seed 1234).

    On a CPU the whole model is built and then sharded, exactly as the DeepSpeed trainer
    builds it (so both start from the same weights). On a GPU it is built on the meta
    device, sharded, and only each rank's shards are allocated and initialised (FSDP2's
    recipe; DTensor's random ops give every shard its slice of one seeded full tensor),
    as deepspeed.zero.Init partitions as it builds."""
    torch.manual_seed(1234)
    if not on_meta:
        return shard(DecoderLM(spec.model, recompute=spec.recompute), spec.precision)
    with torch.device("meta"):
        model = DecoderLM(spec.model, recompute=spec.recompute)
    shard(model, spec.precision)
    model.to_empty(device=device)
    with torch.no_grad():
        for module in model.modules():
            if hasattr(module, "reset_parameters"):
                module.reset_parameters()
    return model


class Fsdp2Trainer:
    """FSDP2 on one rank; `step(phase)` runs one training step (the FsdpTrainer interface)."""

    def __init__(
        self,
        spec: FsdpSpec,
        device: torch.device,
        rank: int,
        lr: float = 1e-3,
        on_meta: bool | None = None,
    ):
        install_collective_modes()  # wraps dist.* before FSDP2 issues anything
        self.spec, self.device, self.rank = spec, device, rank
        self.model = build(spec, device, device.type == "cuda" if on_meta is None else on_meta)
        self.params = sum(p.numel() for p in self.model.parameters())  # DTensor: global numel
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=lr)
        self.scaler = None
        if spec.precision == "fp16":
            from torch.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler

            # DeepSpeed's dynamic loss scale: start at 2**12, halve on overflow, double
            # after 1000 clean steps
            self.scaler = ShardedGradScaler(
                device.type, init_scale=2.0**INITIAL_SCALE_POWER, growth_interval=1000
            )
        self.tokens = synthetic_batch(spec.model, spec.micro_batch, device, seed=rank)

    def _local_grads(self) -> list[torch.Tensor]:
        return [p.grad.to_local() for p in self.model.parameters() if p.grad is not None]

    def step(self, phase: str) -> torch.Tensor:
        with collectives_for(phase, self.device), matmul_precision(self.spec.precision):
            loss = lm_loss(self.model(self.tokens), self.tokens)
            (self.scaler.scale(loss) if self.scaler else loss).backward()
            if self.scaler:
                self.scaler.unscale_(self.optimizer)
            clip_grad_norm(self._local_grads(), CLIP_NORM, self.device)
            if self.scaler:
                self.scaler.step(self.optimizer)
                self.scaler.update()
            else:
                self.optimizer.step()
            self.optimizer.zero_grad(set_to_none=True)
        return loss.detach()

    def close(self) -> None:
        """Drop the model, optimizer states and batch (the caller collects and empties the cache)."""
        del self.model, self.optimizer, self.scaler, self.tokens

    def model_flops_per_step(self, world_size: int) -> float:
        """6 * parameters * tokens: the MFU numerator (forward and backward, no recompute)."""
        return 6.0 * self.params * self.spec.tokens_per_step(world_size)
