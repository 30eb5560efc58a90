"""GPT-3 and LLaMA-2 decoder models of the paper's sizes, in plain torch.

GPT-3: learned positions, LayerNorm, GELU MLP (4h), biases. LLaMA-2: rotary positions,
RMSNorm, SwiGLU MLP, no biases. Attention is torch's scaled_dot_product_attention
(causal), so each GPU runs its fused kernel. Sizes come from artifact.core.config.
`recompute=True` checkpoints every block (torch.utils.checkpoint, non-reentrant): its
activations are recomputed in the backward pass instead of kept.
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

from artifact.core.config import ModelConfig


def _rope(x: torch.Tensor) -> torch.Tensor:
    """Rotary position embedding on (batch, heads, seq, dim)."""
    seq, dim = x.shape[-2], x.shape[-1]
    inv = 1.0 / (10000 ** (torch.arange(0, dim, 2, device=x.device, dtype=torch.float32) / dim))
    ang = torch.outer(torch.arange(seq, device=x.device, dtype=torch.float32), inv)
    cos, sin = ang.cos().to(x.dtype), ang.sin().to(x.dtype)
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).flatten(-2)


class Block(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        llama = cfg.family == "llama2"
        norm = nn.RMSNorm if llama else nn.LayerNorm
        self.llama, self.heads = llama, cfg.heads
        self.norm1, self.norm2 = norm(cfg.hidden), norm(cfg.hidden)
        self.qkv = nn.Linear(cfg.hidden, 3 * cfg.hidden, bias=not llama)
        self.proj = nn.Linear(cfg.hidden, cfg.hidden, bias=not llama)
        if llama:
            self.gate = nn.Linear(cfg.hidden, cfg.ffn_hidden, bias=False)
        self.up = nn.Linear(cfg.hidden, cfg.ffn_hidden, bias=not llama)
        self.down = nn.Linear(cfg.ffn_hidden, cfg.hidden, bias=not llama)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, h = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, s, 3, self.heads, h // self.heads).unbind(2)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        if self.llama:
            q, k = _rope(q), _rope(k)
        att = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(att.transpose(1, 2).reshape(b, s, h))
        y = self.norm2(x)
        y = F.silu(self.gate(y)) * self.up(y) if self.llama else F.gelu(self.up(y))
        return x + self.down(y)


class DecoderLM(nn.Module):
    def __init__(self, cfg: ModelConfig, recompute: bool = False):
        super().__init__()
        self.cfg, self.recompute = cfg, recompute
        self.embed = nn.Embedding(cfg.vocab, cfg.hidden)
        self.pos = None if cfg.family == "llama2" else nn.Embedding(cfg.seq_len, cfg.hidden)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.layers))
        self.norm = (nn.RMSNorm if cfg.family == "llama2" else nn.LayerNorm)(cfg.hidden)
        self.head = nn.Linear(cfg.hidden, cfg.vocab, bias=False)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens)
        if self.pos is not None:
            x = x + self.pos(torch.arange(tokens.shape[1], device=tokens.device))
        for blk in self.blocks:
            if self.recompute and torch.is_grad_enabled():
                x = checkpoint(blk, x, use_reentrant=False)
            else:
                x = blk(x)
        return self.head(self.norm(x))


def lm_loss(logits: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """Next-token cross-entropy."""
    return F.cross_entropy(
        logits[:, :-1].reshape(-1, logits.shape[-1]).float(), tokens[:, 1:].reshape(-1)
    )


def synthetic_batch(cfg: ModelConfig, batch: int, device: torch.device, seed: int) -> torch.Tensor:
    """Token ids generated in-process (no downloads); a fixed seed per rank and step.

    The sequence repeats a short random pattern, so there is something to learn and
    the loss visibly falls within a few steps.
    """
    g = torch.Generator().manual_seed(seed)
    period = 8
    pattern = torch.randint(0, cfg.vocab, (batch, period), generator=g)
    reps = -(-cfg.seq_len // period)
    return pattern.repeat(1, reps)[:, : cfg.seq_len].to(device)
