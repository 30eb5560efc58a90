"""Pipeline parallelism as the paper ran it: Megatron-core's 1F1B schedule, one stage a GPU.

The model is Megatron-core's own GPTModel in the paper's GPT-3 or LLaMA-2 shape, split
into as many stages as there are ranks (tensor and data parallel size 1). Its layers are
Megatron-core's local spec (no Transformer Engine, no Apex) with the core attention
replaced by torch's fused scaled_dot_product_attention (artifact.workloads.sdpa_attention);
`attention="local"` keeps Megatron's own unfused DotProductAttention, for comparison.
`recompute=True` recomputes every layer in the backward pass (Megatron's full, uniform
activation recomputation, one layer a unit). `overlap` is Megatron-core's default schedule,
whose batched p2p sends and receives run on NCCL's stream beside compute; `sequential`
drains the device around every p2p batch and `nocomm` replaces it with a local copy
into the receive buffers (artifact.rank.modes). With one stage there is no p2p at all: the
modes then differ in nothing, and the rows say so.

Half precisions keep parameters in that precision with torch's AdamW (no master
weights, no loss scaling): a throughput configuration, not a recipe for convergence.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.distributed as dist
import torch.nn.functional as F

from artifact.core.config import ModelConfig
from artifact.core.errors import bad_choice
from artifact.rank.modes import collectives_for, install_collective_modes
from artifact.workloads.models import synthetic_batch
from artifact.workloads.precision import dtype_of, matmul_precision

ONE_STAGE_NOTE = "one stage: no pipeline communication, so the modes differ in nothing"
# "sdpa": torch's fused attention kernels; "local": Megatron-core's unfused DotProductAttention
ATTENTIONS: tuple[str, ...] = ("sdpa", "local")


@dataclass(frozen=True)
class PipelineSpec:
    model: ModelConfig
    micro_batch: int
    num_microbatches: int
    precision: str
    attention: str = "sdpa"
    recompute: bool = False

    def __post_init__(self) -> None:
        if self.attention not in ATTENTIONS:
            raise bad_choice("attention", self.attention, ATTENTIONS)

    def tokens_per_step(self) -> int:
        return self.micro_batch * self.num_microbatches * self.model.seq_len


def transformer_config(spec: PipelineSpec, device: torch.device):
    from megatron.core.transformer.transformer_config import TransformerConfig

    m, dtype = spec.model, dtype_of(spec.precision)
    llama = m.family == "llama2"
    return TransformerConfig(
        num_layers=m.layers,
        hidden_size=m.hidden,
        num_attention_heads=m.heads,
        ffn_hidden_size=m.ffn_hidden,
        normalization="RMSNorm" if llama else "LayerNorm",
        gated_linear_unit=llama,
        activation_func=F.silu if llama else F.gelu,
        add_bias_linear=not llama,
        hidden_dropout=0.0,
        attention_dropout=0.0,
        params_dtype=dtype,
        pipeline_dtype=dtype,
        fp16=spec.precision == "fp16",
        bf16=spec.precision == "bf16",
        pipeline_model_parallel_size=dist.get_world_size(),
        use_cpu_initialization=device.type == "cpu",
        batch_p2p_comm=True,
        **(
            # every layer recomputed in the backward pass, one layer a checkpointed unit
            dict(recompute_granularity="full", recompute_method="uniform", recompute_num_layers=1)
            if spec.recompute
            else {}
        ),
    )


class PipelineTrainer:
    def __init__(self, spec: PipelineSpec, device: torch.device, lr: float = 1e-4):
        if device.type == "cpu":
            from artifact.workloads import megatron_cpu_shim

            megatron_cpu_shim.install()
        install_collective_modes()
        from megatron.core import parallel_state
        from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
        from megatron.core.models.gpt.gpt_model import GPTModel
        from megatron.core.pipeline_parallel import get_forward_backward_func
        from megatron.core.tensor_parallel.random import model_parallel_cuda_manual_seed

        if not parallel_state.model_parallel_is_initialized():
            parallel_state.initialize_model_parallel(
                pipeline_model_parallel_size=dist.get_world_size()
            )
        model_parallel_cuda_manual_seed(1234)
        torch.manual_seed(1234 + dist.get_rank())
        self.spec, self.device = spec, device
        self.config = transformer_config(spec, device)
        self.first = parallel_state.is_pipeline_first_stage()
        self.last = parallel_state.is_pipeline_last_stage()
        m = spec.model
        norm = "RMSNorm" if m.family == "llama2" else "LayerNorm"
        if spec.attention == "sdpa":
            from artifact.workloads.sdpa_attention import gpt_layer_spec_sdpa

            layer_spec = gpt_layer_spec_sdpa(normalization=norm)
        else:
            layer_spec = get_gpt_layer_local_spec(normalization=norm)
        self.model = GPTModel(
            config=self.config,
            transformer_layer_spec=layer_spec,
            vocab_size=m.vocab,
            max_sequence_length=m.seq_len,
            pre_process=self.first,
            post_process=self.last,
            position_embedding_type="rope" if m.family == "llama2" else "learned_absolute",
        ).to(device)
        if spec.precision in ("fp16", "bf16"):
            from megatron.core.transformer.module import Float16Module

            # as Megatron's own training does: the whole stage in half precision, with
            # the first stage's input and the last stage's output cast at the edges
            self.model = Float16Module(self.config, self.model)
        local = torch.tensor(
            [sum(p.numel() for p in self.model.parameters())], dtype=torch.float64, device=device
        )
        dist.all_reduce(local)  # every stage's parameters, for MFU
        self.params = int(local.item())
        # eps 1e-8 is 0 in FP16: Adam's update would divide by zero on the first step
        eps = 1e-4 if spec.precision == "fp16" else 1e-8
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=lr, eps=eps)
        self.tokens = synthetic_batch(m, spec.micro_batch, device, seed=0)
        self.positions = (
            torch.arange(m.seq_len, device=device).unsqueeze(0).expand(spec.micro_batch, -1)
        )
        self.labels = torch.roll(self.tokens, -1, dims=1)
        self.forward_backward = get_forward_backward_func()

    def _forward_step(self, data_iterator, model):
        next(data_iterator)
        out = model(self.tokens, self.positions, None, labels=self.labels)

        def loss_func(per_token_loss):
            loss = per_token_loss.float().mean()
            return loss, {"loss": loss.detach()}

        return out, loss_func

    def step(self, phase: str) -> torch.Tensor | None:
        n = self.spec.num_microbatches
        with collectives_for(phase, self.device), matmul_precision(self.spec.precision):
            self.optimizer.zero_grad(set_to_none=True)
            losses = self.forward_backward(
                forward_step_func=self._forward_step,
                data_iterator=iter(range(n)),
                model=[self.model],
                num_microbatches=n,
                seq_length=self.spec.model.seq_len,
                micro_batch_size=self.spec.micro_batch,
                forward_only=False,
            )
            self.optimizer.step()
        if not self.last:
            return None
        return torch.stack([d["loss"] for d in losses]).mean()

    def close(self) -> None:
        """Free the stage's model and optimizer, and reset Megatron's parallel state (its
        groups and global buffers), so the next configuration starts clean."""
        from megatron.core import parallel_state

        del self.model, self.optimizer, self.forward_backward
        parallel_state.destroy_model_parallel()

    def model_flops_per_step(self, world_size: int) -> float:
        """6 * parameters * tokens of one step (all microbatches; data-parallel size 1).

        Recomputation's extra forward pass is not counted: MFU, not hardware FLOP/s."""
        return 6.0 * self.params * self.spec.tokens_per_step()
