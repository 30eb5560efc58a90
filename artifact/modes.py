"""Execution modes (docs/design.md section 3): same model, same data, same kernel list.

- overlap:    collectives are issued asynchronously and waited for when their result
              is needed, so compute runs beside them (the frameworks' default).
- sequential: every collective is waited for right after it is issued, and the device
              is drained before and after it, so no compute kernel can run beside a
              communication kernel (the trace's overlap fraction must be ~0).
- nocomm:     collectives become no-ops on buffers of the same shape; numerics are
              meaningless, the mode exists to validate the sequential baseline (V1).

A phase is a mode measured under a name: `sequential_repeat` is SEQUENTIAL measured a
second time in the same repetition (the A/A check behind the noise floor,
docs/measurement.md "Noise floor"), so it is a phase name, not a fourth way to issue a
collective.

Workloads route every collective through `issue`, so a mode is one switch, not a
copy of the workload.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from enum import StrEnum

import torch

from artifact.measure.timing import synchronize


class Mode(StrEnum):
    OVERLAP = "overlap"
    SEQUENTIAL = "sequential"
    NOCOMM = "nocomm"


# The A/A check: the sequential mode measured again in the same repetition. Eq. 1 between
# the two sequential passes is the noise floor (aggregate.MODE_DERIVED "noise_floor").
SEQUENTIAL_REPEAT = "sequential_repeat"
PHASE_MODES = {SEQUENTIAL_REPEAT: Mode.SEQUENTIAL}


def mode_of(phase: str) -> Mode:
    """The mode a phase runs in: its own name, or the mode it repeats."""
    return PHASE_MODES.get(phase) or Mode(phase)


def with_repeat(phases: tuple[str, ...]) -> tuple[str, ...]:
    """`phases` with the A/A repeat right after `sequential`: the repeat sits beside the
    pass it repeats as `overlap` sits beside it, and every other phase keeps the mode
    of the phase before it (an H200 ran matmuls ~10 % slower right after a busy phase)."""
    i = phases.index(Mode.SEQUENTIAL.value) + 1
    return (*phases[:i], SEQUENTIAL_REPEAT, *phases[i:])


def rotated(phases: tuple[str, ...], rep: int) -> tuple[str, ...]:
    """`phases` rotated by `rep`, so no phase always runs first."""
    k = rep % len(phases)
    return phases[k:] + phases[:k]


class _Done:
    """Stands in for a finished work handle."""

    def wait(self) -> bool:
        return True

    def is_completed(self) -> bool:
        return True


DONE = _Done()


def issue(mode: Mode, launch: Callable[[], object], device: torch.device):
    """Run one collective as `mode` prescribes; returns a handle with .wait().

    `launch` issues the collective asynchronously and returns its work handle (or None
    for operations that are asynchronous by stream, such as a proxy copy).
    """
    if mode is Mode.NOCOMM:
        return DONE
    if mode is Mode.SEQUENTIAL:
        synchronize(device)  # compute queued before must finish first
        work = launch()
        if work is not None:
            work.wait()
        synchronize(device)  # and the collective itself before any later compute
        return DONE
    work = launch()
    return work if work is not None else DONE


# --- Routing a framework's collectives through a mode ---------------------------------
#
# DeepSpeed (and Megatron-core) call torch.distributed's functions themselves, and
# DeepSpeed keeps references to some of them from its initialisation on. So the
# wrappers are installed once, before the framework starts, and consult the mode set
# by `collectives_in` at call time; outside such a block they pass everything through.

_state: dict = {"mode": None, "device": None}
# torch 2.13 names the single-tensor collectives all_gather_single / reduce_scatter_single
# (the older names are deprecated aliases); FSDP2 calls the new names through
# `torch.distributed`, DeepSpeed the old ones, so both are wrapped.
_GATHERS = ("all_gather_into_tensor", "_all_gather_base", "all_gather_single")
_SCATTERS = ("reduce_scatter_tensor", "_reduce_scatter_base", "reduce_scatter_single")
_IN_PLACE = ("all_reduce", "broadcast", "reduce")
_LISTS = ("all_gather", "reduce_scatter")


def _nocomm_stand_in(name: str, a: dict) -> None:
    """Fill outputs as a no-op collective would leave them, with realistic values.

    `a` holds the call's arguments by name. A gather's output gets this rank's shard in
    every slot, a reduce-scatter's output this rank's unreduced slice: copies (memory
    kernels), no communication, and no zeros (zeros make matmuls faster and would bias
    the V1 comparison). In-place collectives (all_reduce, broadcast, reduce) leave the
    local values.
    """
    import torch.distributed as dist

    world, rank = dist.get_world_size(a.get("group")), dist.get_rank(a.get("group"))
    if name in _GATHERS:
        out, inp = a["output_tensor"], a["input_tensor"]
        out.view(world, -1).copy_(inp.reshape(1, -1).expand(world, -1))
    elif name in _SCATTERS:
        a["output"].copy_(a["input"].view(world, -1)[rank].view_as(a["output"]))
    elif name == "all_gather":
        for o in a["tensor_list"]:
            o.copy_(a["tensor"])
    elif name == "reduce_scatter":
        a["output"].copy_(a["input_list"][rank])


def _wrap(name: str, original: Callable):
    signature = inspect.signature(original)

    def collective(*args, **kwargs):
        mode, device = _state["mode"], _state["device"]
        if mode is None or mode is Mode.OVERLAP:
            return original(*args, **kwargs)
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        wants_handle = bound.arguments.get("async_op", False)
        if mode is Mode.NOCOMM:
            _nocomm_stand_in(name, bound.arguments)
        else:  # SEQUENTIAL
            bound.arguments["async_op"] = True
            issue(Mode.SEQUENTIAL, lambda: original(*bound.args, **bound.kwargs), device)
        return DONE if wants_handle else None

    collective.__wrapped__ = original
    collective.__name__ = name
    collective.routed_by_mode = True  # torch's own decorators also set __wrapped__
    return collective


_stand_in_values: dict[tuple, torch.Tensor] = {}


def _fill_received(t: torch.Tensor) -> None:
    """What a no-op receive leaves: fixed random values of the right shape (a copy)."""
    key = (tuple(t.shape), t.dtype, str(t.device))
    if key not in _stand_in_values:
        g = torch.Generator().manual_seed(0)
        _stand_in_values[key] = torch.randn(t.shape, generator=g).to(t.device, t.dtype)
    with torch.no_grad():  # receive buffers are leaves that require grad
        t.copy_(_stand_in_values[key])


def _wrap_batch_p2p(original: Callable):
    """Megatron-core's p2p path: batch_isend_irecv(list of P2POp) -> list of requests.

    isend/irecv themselves stay unwrapped: P2POp accepts only torch's own functions.
    """
    import torch.distributed as dist

    def batch_isend_irecv(p2p_op_list):
        mode, device = _state["mode"], _state["device"]
        if mode is None or mode is Mode.OVERLAP:
            return original(p2p_op_list)
        if mode is Mode.NOCOMM:
            for op in p2p_op_list:
                if op.op is dist.distributed_c10d.irecv:
                    _fill_received(op.tensor)
        else:  # SEQUENTIAL: each batch drained before anything else runs
            synchronize(device)
            for req in original(p2p_op_list):
                req.wait()
            synchronize(device)
        return [DONE for _ in p2p_op_list]

    batch_isend_irecv.__wrapped__ = original
    batch_isend_irecv.routed_by_mode = True
    return batch_isend_irecv


def install_collective_modes() -> None:
    """Wrap torch.distributed's collectives (idempotent); call before the framework starts."""
    import torch.distributed as dist

    for name in (*_GATHERS, *_SCATTERS, *_IN_PLACE, *_LISTS):
        fn = getattr(dist, name, None)
        if fn is not None and not getattr(fn, "routed_by_mode", False):
            setattr(dist, name, _wrap(name, fn))
    if not getattr(dist.batch_isend_irecv, "routed_by_mode", False):
        dist.batch_isend_irecv = _wrap_batch_p2p(dist.batch_isend_irecv)


class collectives_in:
    """`with collectives_in(Mode.SEQUENTIAL, device): train_step()`."""

    def __init__(self, mode: Mode, device: torch.device):
        self.mode, self.device = mode, device

    def __enter__(self):
        self._saved = dict(_state)
        _state.update(mode=self.mode, device=self.device)
        return self

    def __exit__(self, *exc):
        _state.update(self._saved)
