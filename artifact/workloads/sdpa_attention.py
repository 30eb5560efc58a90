"""Megatron-core core attention through torch's scaled_dot_product_attention.

Megatron-core 0.16.1 without Transformer Engine has one core attention of its own,
DotProductAttention: it materialises the [b, np, sq, sk] score matrix, masks and
softmaxes it in separate memory-bound kernels and keeps it for the backward pass. This
module is a drop-in replacement with the same constructor and forward signature that
calls torch.nn.functional.scaled_dot_product_attention (causal) instead, so on a GPU
torch picks its fused flash or memory-efficient kernel, and on the CPU the math path.

It covers what the artifact's GPT-3 and LLaMA-2 workloads use: causal (or no) masking,
no attention bias, no packed sequences, no sliding window, vanilla softmax, context
parallel size 1, grouped-query attention by repeating keys and values. Anything else is
refused rather than silently computed differently.
"""

from __future__ import annotations

import copy
import math

import torch
import torch.nn.functional as F
from megatron.core import tensor_parallel
from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
from megatron.core.process_groups_config import ProcessGroupCollection
from megatron.core.transformer.enums import AttnMaskType
from megatron.core.transformer.module import MegatronModule
from megatron.core.transformer.spec_utils import ModuleSpec
from megatron.core.transformer.utils import is_layer_window_attention
from megatron.core.utils import divide


class SdpaDotProductAttention(MegatronModule):
    """DotProductAttention's interface; torch's fused attention inside.

    query [sq, b, np, hn], key and value [sk, b, ng, hn]; returns [sq, b, np * hn].
    """

    def __init__(
        self,
        config,
        layer_number: int,
        attn_mask_type,
        attention_type: str,
        attention_dropout: float | None = None,
        softmax_scale: float | None = None,
        cp_comm_type: str | None = None,
        pg_collection=None,
    ):
        super().__init__(config=config)
        if config.context_parallel_size != 1:
            raise NotImplementedError("SDPA core attention: context parallel size must be 1")
        if config.softmax_type != "vanilla":
            raise NotImplementedError(f"SDPA core attention: softmax {config.softmax_type!r}")
        if is_layer_window_attention(
            config.window_size, config.window_attn_skip_freq, layer_number
        ):
            raise NotImplementedError("SDPA core attention: no sliding-window attention")
        if attn_mask_type not in (AttnMaskType.causal, AttnMaskType.no_mask):
            raise NotImplementedError(f"SDPA core attention: mask type {attn_mask_type}")
        self.layer_number = max(1, layer_number)
        self.attn_mask_type = attn_mask_type
        self.attention_type = attention_type
        if pg_collection is None:
            pg_collection = ProcessGroupCollection.use_mpu_process_groups(required_pgs=["tp"])
        self.pg_collection = pg_collection
        tp = pg_collection.tp.size()
        projection_size = config.kv_channels * config.num_attention_heads
        self.hidden_size_per_partition = divide(projection_size, tp)
        head_dim = divide(projection_size, config.num_attention_heads)
        self.heads = divide(config.num_attention_heads, tp)
        self.groups = divide(config.num_query_groups, tp)
        # DotProductAttention divides the scale by layer_number for
        # apply_query_key_layer_scaling and multiplies it back inside its softmax: the
        # product is this scale either way.
        self.softmax_scale = (
            softmax_scale if softmax_scale is not None else 1.0 / math.sqrt(head_dim)
        )
        self.dropout_p = (
            config.attention_dropout if attention_dropout is None else attention_dropout
        )

    def forward(
        self,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        attention_mask: torch.Tensor | None,
        attn_mask_type=None,
        attention_bias: torch.Tensor | None = None,
        packed_seq_params=None,
    ) -> torch.Tensor:
        if packed_seq_params is not None:
            raise NotImplementedError("SDPA core attention: no packed sequences")
        if attention_bias is not None:
            raise NotImplementedError("SDPA core attention: no attention bias")
        mask_type = self.attn_mask_type if attn_mask_type is None else attn_mask_type
        causal = mask_type == AttnMaskType.causal
        if attention_mask is not None:
            # Megatron's masks are True where attention is *not* allowed
            raise NotImplementedError("SDPA core attention: no explicit attention mask")
        sq, b = query.shape[0], query.shape[1]
        if causal and key.shape[0] != sq:
            # torch's is_causal aligns the mask top-left; Megatron's training mask is
            # square, and nothing here decodes with a cache
            raise NotImplementedError("SDPA core attention: causal needs sq == sk")
        if self.heads != self.groups:  # grouped-query attention: [sk, b, ng, hn] -> np
            key = key.repeat_interleave(self.heads // self.groups, dim=2)
            value = value.repeat_interleave(self.heads // self.groups, dim=2)
        # [s, b, n, hn] -> [b, n, s, hn]: a view; the kernels want the last dim contiguous
        q, k, v = (t.permute(1, 2, 0, 3) for t in (query, key, value))
        p = self.dropout_p if self.training else 0.0
        if p > 0.0:  # as DotProductAttention: dropout under Megatron's RNG tracker
            with tensor_parallel.get_cuda_rng_tracker().fork():
                out = F.scaled_dot_product_attention(
                    q, k, v, dropout_p=p, is_causal=causal, scale=self.softmax_scale
                )
        else:
            out = F.scaled_dot_product_attention(
                q, k, v, is_causal=causal, scale=self.softmax_scale
            )
        # [b, np, sq, hn] -> [sq, b, np * hn]
        return out.permute(2, 0, 1, 3).reshape(sq, b, self.hidden_size_per_partition)


def gpt_layer_spec_sdpa(normalization: str) -> ModuleSpec:
    """Megatron-core's local GPT layer spec with SdpaDotProductAttention as core attention."""
    spec = copy.deepcopy(get_gpt_layer_local_spec(normalization=normalization))
    spec.submodules.self_attention.submodules.core_attention = SdpaDotProductAttention
    return spec
