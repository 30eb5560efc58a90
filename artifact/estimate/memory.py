"""Estimated peak device memory of one rank of a training configuration.

Used before a configuration is built (artifact.rank.capability) so that one that cannot fit
is recorded "not run" instead of dying in the middle of a figure. An estimate, not a
measurement: every record also carries the measured peak (`peak_memory_gib`).

How each term is counted (model states, activations, the pipeline's and the logits'), and
what the counts were checked against: docs/measurement.md, "The memory estimate".
"""

from __future__ import annotations

from dataclasses import replace

from artifact.core.config import ModelConfig
from artifact.core.options import RECOMPUTE_CHOICES
from artifact.core.units import GIB  # noqa: F401  (memory.GIB: the experiments use it)

# cuBLAS workspaces, NCCL buffers, allocator fragmentation (measured at world size 1 well
# under this, docs/history.md: the rest is room for NCCL's buffers at W > 1)
RUNTIME_OVERHEAD = 1.0 * GIB
# ZeRO-3's settings (artifact.workloads.fsdp_deepspeed.deepspeed_config), in elements
DEEPSPEED_REDUCE_BUCKET = int(5e8)  # reduce_bucket_size
DEEPSPEED_MAX_LIVE = int(1e9)  # stage3_max_live_parameters
DEEPSPEED_MAX_REUSE = int(1e9)  # stage3_max_reuse_distance
# A configuration fits where its estimate plus this share of it fits the memory: room for
# the estimate's error and PyTorch's caching allocator's fragmentation. A choice inside
# the 4 to 22 % the measured peaks allow (docs/history.md), not a measured value.
FIT_MARGIN = 0.10


def with_margin(need_bytes: float) -> float:
    """An estimate with FIT_MARGIN on top: the memory a configuration must find free."""
    return need_bytes * (1 + FIT_MARGIN)


def fits(need_bytes: float, memory_bytes: float) -> bool:
    """Whether a configuration estimated at `need_bytes` fits `memory_bytes`, with the margin."""
    return with_margin(need_bytes) <= memory_bytes


def _act_bytes(precision: str) -> int:
    return 4 if precision in ("fp32", "tf32") else 2


def total_params(m: ModelConfig) -> int:
    """Every parameter of artifact.workloads.models.DecoderLM (untied embedding and head)."""
    pos = m.seq_len * m.hidden if m.family == "gpt3" else 0
    return m.params + m.vocab * m.hidden + pos


def layer_activation_bytes(
    m: ModelConfig, micro_batch: int, precision: str, materialised_attention: bool
) -> float:
    """One Megatron-core layer's activations (Korthikanti's accounting: the docstring)."""
    s, b, h, a, f = m.seq_len, micro_batch, m.hidden, m.heads, m.ffn_hidden
    mlp = (2 + 8 * f / h) if m.family == "llama2" else (3 + 4 * f / h)
    per_16bit = s * b * h * (15 + mlp) + (5 * a * s * s * b if materialised_attention else 0)
    return per_16bit * _act_bytes(precision) / 2


def logits_bytes(m: ModelConfig, micro_batch: int, precision: str) -> float:
    """Megatron-core's logits at one pipeline stage (Korthikanti's accounting)."""
    return micro_batch * m.seq_len * m.vocab * (_act_bytes(precision) + 8)


def block_bytes(m: ModelConfig, micro_batch: int, precision: str) -> float:
    """What one DecoderLM block keeps for its backward pass (counted: the docstring above)."""
    s, b, h, f = m.seq_len, micro_batch, m.hidden, m.ffn_hidden
    llama = m.family == "llama2"
    per_16bit = s * b * h * (10 + (4 if llama else 0) + 4 + 2 + (8 if llama else 4) * f / h)
    return per_16bit * _act_bytes(precision) / 2


# a block recomputed in the backward pass holds its activations and about a third more in
# gradients while its backward runs (counted: 1.26 to 1.33 times the block)
RECOMPUTED_BLOCK = 4 / 3
LOSS_BYTES_PER_LOGIT = 12  # three FP32 tensors of the logits' shape at the loss's backward


def loss_bytes(m: ModelConfig, micro_batch: int) -> float:
    """The peak the loss adds (artifact.workloads.models.lm_loss), whatever the precision."""
    return micro_batch * m.seq_len * m.vocab * LOSS_BYTES_PER_LOGIT


def block_params(m: ModelConfig) -> int:
    """Parameters of one transformer block (as ZeRO-3's prefetch bucket counts them)."""
    return (m.params - m.vocab * m.hidden) // m.layers


def gathered_params(m: ModelConfig) -> int:
    """Parameters ZeRO-3 still holds gathered where the backward pass begins, at W > 1: it
    keeps a parameter whose next use lies within stage3_max_reuse_distance parameters of
    the module trace. The output head's next use is next; a block's lies past every later
    block forward and back, so the last ceil((distance - head) / (2 * block)) blocks stay.
    Bounded by the model and by stage3_max_live_parameters (its prefetching keeps up to
    that many too: on the CPU, with the distance 0; docs/measurement.md)."""
    head, block = m.vocab * m.hidden, block_params(m)
    if head + 2 * m.layers * block <= DEEPSPEED_MAX_REUSE:  # the input embedding's reuse too
        return min(total_params(m), DEEPSPEED_MAX_LIVE)
    blocks = min(m.layers, max(0, -(-(DEEPSPEED_MAX_REUSE - head) // (2 * block))))
    return min(total_params(m), DEEPSPEED_MAX_LIVE, head + blocks * block)


def states_bytes(
    m: ModelConfig, world_size: int, precision: str = "fp16", impl: str = "deepspeed"
) -> float:
    """Model states on one rank, sharded over the ranks (the module docstring's bytes)."""
    per_param = 20 if impl == "deepspeed" and _act_bytes(precision) == 4 else 16
    return per_param * total_params(m) / world_size


def fsdp_bytes(
    m: ModelConfig,
    micro_batch: int,
    precision: str,
    world_size: int,
    recompute: bool = False,
    impl: str = "deepspeed",
) -> float:
    """One rank of DeepSpeed ZeRO-3 or FSDP2 over `world_size` ranks (torch SDPA attention)."""
    acts = activation_bytes(m, micro_batch, precision, recompute)
    states = states_bytes(m, world_size, precision, impl)
    if impl != "deepspeed":
        return states + acts + RUNTIME_OVERHEAD
    # its gradient bucket (contiguous_gradients) and, at W > 1, the gathered parameters kept
    # for the backward pass (at W = 1 the shard is the parameter: nothing more is allocated)
    held = DEEPSPEED_REDUCE_BUCKET + (gathered_params(m) if world_size > 1 else 0)
    return states + held * _act_bytes(precision) + acts + RUNTIME_OVERHEAD


def activation_bytes(m: ModelConfig, micro_batch: int, precision: str, recompute: bool) -> float:
    """DecoderLM's activations and loss at the step's peak (the module docstring)."""
    layer, loss = block_bytes(m, micro_batch, precision), loss_bytes(m, micro_batch)
    if recompute:  # each block's input stays; the loss's peak, then one block recomputed
        inputs = m.layers * m.seq_len * micro_batch * m.hidden * _act_bytes(precision)
        return inputs + max(loss, layer * RECOMPUTED_BLOCK)
    return m.layers * layer + loss


def pipeline_bytes(
    m: ModelConfig,
    micro_batch: int,
    num_microbatches: int,
    precision: str,
    stages: int,
    materialised_attention: bool = True,
    recompute: bool = False,
) -> float:
    """The heaviest stage of a Megatron-core 1F1B pipeline (the first: most micro-batches
    in flight)."""
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


def with_recompute(spec, world_size: int, choice: str, budget_gib: float | None):
    """The spec with activation recomputation on or off. `auto` turns it on exactly where
    the estimate without it does not fit `budget_gib` (`fits`; the paper preset: 80 GB
    cards), so the paper's largest points fit; None: never. Returns (spec, why it is on or "")."""
    if choice not in RECOMPUTE_CHOICES:
        raise ValueError(f"recompute {choice!r}; accepted: {', '.join(RECOMPUTE_CHOICES)}")
    if choice != "auto":
        return replace(
            spec, recompute=choice == "on"
        ), "on by --recompute on" if choice == "on" else ""
    without = estimate(replace(spec, recompute=False), world_size)
    if budget_gib is None or fits(without, budget_gib * GIB):
        return replace(spec, recompute=False), ""
    why = (
        f"without recomputation about {without / GIB:.0f} GiB a GPU, which with a "
        f"{FIT_MARGIN:.0%} margin does not fit {budget_gib:g} GiB"
    )
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
    return fsdp_bytes(
        spec.model, spec.micro_batch, spec.precision, world_size, recompute, spec.impl
    )
