"""Estimated peak device memory of one rank of a training configuration.

Used before a configuration is built (artifact.run.capability) so that one that cannot fit
is recorded "not run" instead of dying in the middle of a figure. An estimate, not a
measurement: every record also carries the measured peak (`peak_memory_gib`).

Model states: ZeRO-3 shards parameters, gradients and Adam states over the ranks;
16 bytes a parameter in every precision (half: 2 parameter + 2 gradient + 4 FP32 master
+ 8 Adam; FP32: 4 + 4 + 8). FSDP2 (artifact.workloads.fsdp2) shards the same 16 bytes
(4 FP32 parameter + 4 FP32 gradient + 8 Adam; its half-precision copies exist only while
a unit is gathered, as ZeRO-3's live parameters), so one estimate serves both. A pipeline stage keeps its own layers whole; torch's AdamW
on Megatron's Float16Module keeps states in the parameters' dtype (half: 2 + 2 + 4 = 8
bytes; FP32: 16).

Activations per layer, from Korthikanti et al. 2022 ("Reducing activation recomputation
in large transformer models", no tensor parallelism), in 16-bit bytes:
    s*b*h*(15 + MLP) + 5*a*s*s*b   (the last term only where attention is materialised)
with MLP = 3 + 4*f/h for GPT's two-matrix MLP and 2 + 8*f/h for LLaMA's SwiGLU. FSDP
rows use torch's scaled_dot_product_attention (fused: no attention matrix); the
Megatron local spec materialises it. FP32 doubles every activation. The logits add
b*s*V*(act + 4 + 4) bytes (the FP32 copy for the loss and its gradient).
"""

from __future__ import annotations

from dataclasses import replace

from artifact.core.config import ModelConfig
from artifact.core.units import GIB  # noqa: F401  (memory.GIB: the experiments use it)

RUNTIME_OVERHEAD = 1.0 * GIB  # cuBLAS workspaces, NCCL buffers, allocator fragmentation


def _act_bytes(precision: str) -> int:
    return 4 if precision in ("fp32", "tf32") else 2


def total_params(m: ModelConfig) -> int:
    """Every parameter of artifact.workloads.models.DecoderLM (untied embedding and head)."""
    pos = m.seq_len * m.hidden if m.family == "gpt3" else 0
    return m.params + m.vocab * m.hidden + pos


def layer_activation_bytes(
    m: ModelConfig, micro_batch: int, precision: str, materialised_attention: bool
) -> float:
    s, b, h, a, f = m.seq_len, micro_batch, m.hidden, m.heads, m.ffn_hidden
    mlp = (2 + 8 * f / h) if m.family == "llama2" else (3 + 4 * f / h)
    per_16bit = s * b * h * (15 + mlp) + (5 * a * s * s * b if materialised_attention else 0)
    return per_16bit * _act_bytes(precision) / 2


def logits_bytes(m: ModelConfig, micro_batch: int, precision: str) -> float:
    return micro_batch * m.seq_len * m.vocab * (_act_bytes(precision) + 8)


def fsdp_bytes(
    m: ModelConfig, micro_batch: int, precision: str, world_size: int, recompute: bool = False
) -> float:
    """One rank of DeepSpeed ZeRO-3 or FSDP2 over `world_size` ranks (torch SDPA attention)."""
    states = 16 * total_params(m) / world_size
    layer = layer_activation_bytes(m, micro_batch, precision, materialised_attention=False)
    # with recomputation only each layer's input stays, plus one layer's full activations
    kept = m.layers * (m.seq_len * micro_batch * m.hidden * _act_bytes(precision)) + layer
    acts = kept if recompute else m.layers * layer
    return states + acts + logits_bytes(m, micro_batch, precision) + RUNTIME_OVERHEAD


def pipeline_bytes(
    m: ModelConfig,
    micro_batch: int,
    num_microbatches: int,
    precision: str,
    stages: int,
    materialised_attention: bool = True,
    recompute: bool = False,
) -> float:
    """The heaviest stage of a Megatron-core 1F1B pipeline (the first: most micro-batches in flight)."""
    per_param = 16 if precision in ("fp32", "tf32") else 8
    states = per_param * total_params(m) / stages
    layers = -(-m.layers // stages)
    layer = layer_activation_bytes(m, micro_batch, precision, materialised_attention)
    in_flight = min(stages, num_microbatches)
    acts = in_flight * layers * layer
    if recompute:  # each layer's input stays, plus the one layer being recomputed
        acts = in_flight * layers * m.seq_len * micro_batch * m.hidden * _act_bytes(precision)
        acts += layer
    last = logits_bytes(m, micro_batch, precision) if stages == 1 else 0
    return states + acts + last + RUNTIME_OVERHEAD


RECOMPUTE_CHOICES = ("auto", "on", "off")


def with_recompute(spec, world_size: int, choice: str, budget_gib: float | None):
    """The spec with activation recomputation on or off. `auto` turns it on exactly where
    the estimate without it exceeds `budget_gib` (the paper preset: 80 GB cards), so the
    paper's largest points fit; None: never. Returns (spec, why it is on or "")."""
    if choice not in RECOMPUTE_CHOICES:
        raise ValueError(f"recompute {choice!r}; accepted: {', '.join(RECOMPUTE_CHOICES)}")
    if choice != "auto":
        return replace(
            spec, recompute=choice == "on"
        ), "on by --recompute on" if choice == "on" else ""
    without = estimate(replace(spec, recompute=False), world_size)
    if budget_gib is None or without <= budget_gib * GIB:
        return replace(spec, recompute=False), ""
    why = f"without recomputation about {without / GIB:.0f} GiB a GPU > {budget_gib:g} GiB"
    return replace(spec, recompute=True), why


def estimate(spec, world_size: int) -> float:
    """Peak bytes of one rank for an FsdpSpec or a PipelineSpec (artifact.workloads)."""
    recompute = bool(getattr(spec, "recompute", False))
    if hasattr(spec, "num_microbatches"):
        return pipeline_bytes(
            spec.model,
            spec.micro_batch,
            spec.num_microbatches,
            spec.precision,
            world_size,
            materialised_attention=getattr(spec, "attention", "local") == "local",
            recompute=recompute,
        )
    return fsdp_bytes(spec.model, spec.micro_batch, spec.precision, world_size, recompute)
