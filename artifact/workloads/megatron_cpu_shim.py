"""Lets Megatron-core's pipeline schedule run on CPU over gloo, for the tiny preset and CI.

Megatron-core 0.16.1 hard-codes CUDA in places a CPU run reaches: tensors created with
device="cuda" (causal masks, token counters), torch.cuda.current_device() for p2p
buffers, torch.cuda.synchronize(), and its CUDA RNG tracker. In a process that has no
GPU this maps each of those to the CPU. It is installed only when the run's device is
the CPU (never on GPU runs), and every pipeline record made with it says so in its note.
"""

from __future__ import annotations

import functools

import torch

NOTE = "CPU pipeline through a CUDA-to-CPU shim for Megatron-core's hard-coded CUDA calls"
_FACTORIES = ("zeros", "empty", "ones", "full", "arange", "tensor", "randn", "rand")
_installed = False


def _on_cpu(factory):
    @functools.wraps(factory)
    def make(*args, **kwargs):
        device = kwargs.get("device")
        if device is not None and str(device).startswith("cuda"):
            kwargs["device"] = "cpu"
        return factory(*args, **kwargs)

    return make


def install() -> None:
    """Idempotent; refuses to run where a GPU is present."""
    global _installed
    if _installed:
        return
    if torch.cuda.is_available():
        raise RuntimeError("the Megatron CPU shim must never run on a machine with a GPU")
    for name in _FACTORIES:
        setattr(torch, name, _on_cpu(getattr(torch, name)))
    torch.cuda.current_device = lambda: "cpu"
    torch.cuda.synchronize = lambda *a, **k: None
    torch.cuda.manual_seed = lambda seed: None
    torch.cuda.get_rng_state = lambda *a, **k: torch.get_rng_state()
    torch.cuda.set_rng_state = lambda state, *a, **k: torch.set_rng_state(state)
    import megatron.core.tensor_parallel.random as mrandom

    mrandom._get_cuda_rng_state = lambda *a, **k: torch.get_rng_state()
    mrandom._set_cuda_rng_state = lambda state, *a, **k: torch.set_rng_state(state)
    _installed = True
