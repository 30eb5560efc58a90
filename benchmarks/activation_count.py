"""What the FSDP model (artifact.workloads.models.DecoderLM) holds at the peak of a
training step, beside artifact.estimate.memory's activation and loss terms (issue 31),
counted on the meta device: shapes only, no GPU and no arithmetic.

The model's own forward, loss and backward run on meta tensors under torch's MemTracker
(torch.distributed._tools.mem_tracker), which adds up every tensor as it is made and
freed; the parameters are left out and each gradient is let go once made (ZeRO-3 shards
both away: the estimate's states term). Two stand-ins, where the meta device would not take the GPU's kernel:
- attention: the kernel SDPA runs on an NVIDIA GPU (flash for 16-bit, memory-efficient
  for FP32), called directly; on meta SDPA falls back to the math kernel, which keeps
  the attention matrix;
- RMSNorm: the fused kernel's saved tensors (its input and one FP32 scale a row); off a
  GPU nn.RMSNorm decomposes into FP32 copies the fused kernel does not keep.
Not seen here: ZeRO-3's gathered parameters and buckets, the caching allocator, cuBLAS
workspaces (the estimate's states and overhead; benchmarks/emulated_memory.py measures the
whole peak on a GPU).

    python benchmarks/activation_count.py --preset paper
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import warnings
from pathlib import Path

import torch
import torch.nn.functional as F

# this checkout's artifact package, not another one an editable install may point to
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from artifact.core.config import ModelConfig, get_preset  # noqa: E402
from artifact.core.errors import ArtifactError  # noqa: E402
from artifact.core.units import GIB  # noqa: E402
from artifact.estimate import memory  # noqa: E402
from artifact.workloads.models import DecoderLM, lm_loss  # noqa: E402
from artifact.workloads.precision import dtype_of  # noqa: E402


def _attention(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, **kwargs):
    if q.dtype == torch.float32:  # flash takes 16-bit only
        out = torch.ops.aten._scaled_dot_product_efficient_attention(
            q, k, v, attn_mask, True, dropout_p, is_causal
        )
    else:
        out = torch.ops.aten._scaled_dot_product_flash_attention(q, k, v, dropout_p, is_causal)
    return out[0]


class _FusedRMSNorm(torch.autograd.Function):
    """Allocates what torch's fused RMSNorm kernel does: its output, and it saves the
    input with one FP32 reciprocal RMS a row."""

    @staticmethod
    def forward(ctx, x, weight):
        rstd = x.new_empty((*x.shape[:-1], 1), dtype=torch.float32)
        ctx.save_for_backward(x, rstd, weight)
        return torch.empty_like(x)

    @staticmethod
    def backward(ctx, grad):
        x, _, weight = ctx.saved_tensors
        return torch.empty_like(x), torch.empty_like(weight)


def _rms_norm(x, normalized_shape, weight=None, eps=None):
    return _FusedRMSNorm.apply(x, weight)


@contextlib.contextmanager
def gpu_kernels():
    """SDPA and RMSNorm as on an NVIDIA GPU, for the block's duration."""
    saved = F.scaled_dot_product_attention, F.rms_norm
    F.scaled_dot_product_attention, F.rms_norm = _attention, _rms_norm
    try:
        yield
    finally:
        F.scaled_dot_product_attention, F.rms_norm = saved


def held_bytes(model: ModelConfig, micro_batch: int, precision: str, recompute: bool) -> int:
    """The peak of one step's forward, loss and backward, less the parameters (each
    gradient is let go once made, so the peak holds at most the one being made)."""
    from torch.distributed._tools.mem_tracker import MemTracker

    with torch.device("meta"):  # built without memory or initialisation
        lm = DecoderLM(model, recompute=recompute).to(dtype_of(precision))
    for p in lm.parameters():  # each gradient let go once made, as ZeRO-3 shards it away
        p.register_post_accumulate_grad_hook(lambda p: setattr(p, "grad", None))
    tokens = torch.zeros(micro_batch, model.seq_len, dtype=torch.long, device="meta")
    tracker = MemTracker()
    tracker.track_external(lm)  # known as parameters: their views are not activations
    with gpu_kernels(), tracker, warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Expected a tensor")  # the hooks' None
        lm_loss(lm(tokens), tokens).backward()
    (peak,) = tracker.get_tracker_snapshot("peak").values()
    params = sum(v for k, v in peak.items() if str(k).endswith("PARAM"))
    return peak["Total"] - params


def main(argv: list[str] | None = None) -> int:
    from emulated_memory import configurations  # the run's builders, rank 0 of 4 (a script)

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--preset", default="paper")
    args = p.parse_args(argv)
    try:
        preset = get_preset(args.preset)
    except ArtifactError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print("| model | precision | micro-batch | recompute | counted GiB | estimated GiB | ratio |")
    print("|---|---|---:|---|---:|---:|---:|")
    for point, _ in configurations(preset, 4, ["fig4", "fig10", "fig11"], torch.device("cpu")):
        spec = point.spec
        if hasattr(spec, "num_microbatches"):  # the pipeline runs Megatron's layers
            continue
        m, mb, prec, rc = spec.model, spec.micro_batch, spec.precision, spec.recompute
        held = held_bytes(m, mb, prec, rc)
        est = memory.activation_bytes(m, mb, prec, rc)
        print(
            f"| {m.name} | {prec} | {mb} | {'on' if rc else 'off'} | "
            f"{held / GIB:.1f} | {est / GIB:.1f} | {est / held:.2f} |",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
