"""Execution modes (docs/design.md section 3): same model, same data, same kernel list.

- overlap:    collectives are issued asynchronously and waited for when their result
              is needed, so compute runs beside them (the frameworks' default).
- sequential: every collective is ordered after the compute queued before it and before
              the compute queued after it, by stream order (CUDA events, no host
              synchronisation), so no compute kernel runs beside a communication kernel
              (the trace's overlap fraction must be ~0) and the GPU never waits for the host.
- nocomm:     collectives become no-ops on buffers of the same shape; numerics are
              meaningless, the mode exists to validate the sequential baseline (V1).

A phase is a mode measured under a name (artifact/core/phases.py: the A/A repeat, the
zero-byte controls); the control phases route every collective through the same
collective on zero bytes, outputs filled as nocomm fills them.

Workloads route every collective through `issue`, so a mode is one switch, not a
copy of the workload.
"""

from __future__ import annotations

import inspect
from collections import Counter
from collections.abc import Callable

import torch

from artifact.core import traffic
from artifact.core.phases import (  # noqa: F401  (re-exported: the modes' names live there)
    CONTROL_PHASES,
    OVERLAP_CONTROL,
    OVERLAP_REPEAT,
    PHASE_MODES,
    SEQUENTIAL_CONTROL,
    Mode,
    balanced_order,
    mode_of,
    moves_zero_bytes,
    williams_rows,
    with_controls,
    with_repeat,
)
from artifact.measure.kernels import STAND_IN_MARK


class _Done:
    """Stands in for a finished work handle."""

    def wait(self) -> bool:
        return True

    def is_completed(self) -> bool:
        return True


DONE = _Done()


def in_stream_order(launch: Callable[[], object], device: torch.device, stream=None) -> _Done:
    """Run one collective between the compute before it and the compute after it, by
    stream order alone: the stream it runs on waits for the compute stream (the default
    stream) first, and the compute stream waits for it afterwards. The host never waits
    for the device, so the GPU does not idle while the host catches up (a device-wide
    synchronisation here cost ZeRO-3 tens of ms a step; docs/history.md).

    `stream` is the side stream `launch` enqueues on, where it is not the current one
    (the copy proxy's); NCCL's own stream is ordered by the work handle's wait().
    """
    if device.type != "cuda":
        work = launch()
        if work is not None:
            work.wait()  # gloo: the host waits, there are no streams
        return DONE
    compute = torch.cuda.default_stream(device)
    comm = stream or torch.cuda.current_stream(device)
    if comm != compute:
        comm.wait_stream(compute)  # compute queued before must finish first
    work = launch()
    if work is not None:
        work.wait()  # the current stream waits for the collective (no host wait)
    if comm != compute:
        compute.wait_stream(comm)  # and the collective before any later compute
    return DONE


def issue(mode: Mode, launch: Callable[[], object], device: torch.device, stream=None):
    """Run one collective as `mode` prescribes; returns a handle with .wait().

    `launch` issues the collective asynchronously and returns its work handle (or None
    for operations that are asynchronous by stream, such as a proxy copy on `stream`).
    """
    if mode is Mode.NOCOMM:
        return DONE
    if mode is Mode.SEQUENTIAL:
        return in_stream_order(launch, device, stream)
    work = launch()
    return work if work is not None else DONE


# --- Routing a framework's collectives through a mode ---------------------------------
#
# DeepSpeed (and Megatron-core) call torch.distributed's functions themselves, and
# DeepSpeed keeps references to some of them from its initialisation on. So the
# wrappers are installed once, before the framework starts, and consult the mode set
# by `collectives_in` at call time; outside such a block they pass everything through.

_state: dict = {
    "mode": None,
    "device": None,
    "zero_bytes": False,
    "emulated": False,
    "count": False,  # count each collective a measured step issues (the rehearsal's checks)
}
# what this rank's collectives moved inside measured steps, while counting is on: calls,
# ring bytes (artifact.core.traffic), and a pipeline's point-to-point bytes sent and received
COUNTS: Counter[str] = Counter()


def count_traffic(on: bool) -> None:
    """Count every collective a measured step issues (COUNTS); off by default, so timed
    runs pay no bookkeeping."""
    _state["count"] = on


def _count(name: str, bound: inspect.BoundArguments) -> None:
    import torch.distributed as dist

    COUNTS["calls"] += 1
    if _state["zero_bytes"] or _state["mode"] is Mode.NOCOMM:
        return
    a = bound.arguments
    if name in traffic.GATHERS:
        full = a.get("output_tensor", a.get("tensor_list"))
    elif name in traffic.SCATTERS:
        full = a.get("input", a.get("input_list"))
    else:
        full = a["tensor"]
    tensors = full if isinstance(full, list) else [full]
    numel = sum(t.numel() for t in tensors)
    world = dist.get_world_size(a.get("group"))
    COUNTS["ring_bytes"] += traffic.ring_bytes(name, numel, tensors[0].element_size(), world)


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
    with torch.profiler.record_function(STAND_IN_MARK):  # the trace counts these as memory
        _fill(name, a)


def _fill(name: str, a: dict) -> None:
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


def _empty_like(value):
    """A tensor argument's zero-element twin (lists of tensors element by element)."""
    if isinstance(value, torch.Tensor):
        return value.new_empty(0)
    if isinstance(value, list) and value and all(isinstance(t, torch.Tensor) for t in value):
        return [t.new_empty(0) for t in value]
    return value


def _zero_byte_call(name: str, original: Callable, bound: inspect.BoundArguments) -> Callable:
    """The control's collective: outputs filled as nocomm fills them, then the same
    collective, on the same group, launched on zero-element tensors (it moves nothing)."""
    _nocomm_stand_in(name, bound.arguments)
    empty = {k: _empty_like(v) for k, v in bound.arguments.items()}
    return lambda: original(**empty)


def _emulated(name: str, bound: inspect.BoundArguments):
    """A collective under `--emulate-world` (artifact.rank.emulation): rank 0's bytes as
    local copies, run as the mode prescribes; the zero-byte control moves none."""
    from artifact.rank import emulation

    mode, device, zero = _state["mode"], _state["device"], _state["zero_bytes"]
    wants_handle = bound.arguments.get("async_op", False)
    if mode is None or mode is Mode.NOCOMM or zero:
        # outside a measured step (set-up), nocomm and the controls: outputs filled, no bytes
        _nocomm_stand_in(name, bound.arguments)
    if mode is None or mode is Mode.NOCOMM:
        return DONE if wants_handle else None

    def launch():  # a control takes the bytes' path (stream order, event, wait), no copies
        return emulation.traffic(name, bound.arguments, device, _GATHERS, _SCATTERS, zero)

    if mode is Mode.OVERLAP:
        work = launch() or DONE
        if wants_handle:
            return work
        work.wait()
        return None
    in_stream_order(launch, device, emulation.comm_stream(device))  # SEQUENTIAL
    return DONE if wants_handle else None


def _wrap(name: str, original: Callable):
    signature = inspect.signature(original)

    def collective(*args, **kwargs):
        mode, device = _state["mode"], _state["device"]
        if _state["count"] and mode is not None and mode is not Mode.NOCOMM:
            _count(name, signature.bind(*args, **kwargs))
        if _state["emulated"]:
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            return _emulated(name, bound)
        if mode is None or (mode is Mode.OVERLAP and not _state["zero_bytes"]):
            return original(*args, **kwargs)
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        wants_handle = bound.arguments.get("async_op", False)
        if mode is Mode.NOCOMM:
            _nocomm_stand_in(name, bound.arguments)
            return DONE if wants_handle else None
        bound.arguments["async_op"] = True
        if _state["zero_bytes"]:
            launch = _zero_byte_call(name, original, bound)
        else:
            launch = lambda: original(*bound.args, **bound.kwargs)  # noqa: E731
        if mode is Mode.OVERLAP:  # a control on the overlap path: the caller waits
            # (torch may skip an empty collective and hand back no work at all)
            work = launch() or DONE
            if wants_handle:
                return work
            work.wait()
            return None
        in_stream_order(launch, device)  # SEQUENTIAL
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
    with torch.no_grad(), torch.profiler.record_function(STAND_IN_MARK):
        t.copy_(_stand_in_values[key])  # (no_grad: receive buffers are leaves needing grad)


def _wrap_batch_p2p(original: Callable):
    """Megatron-core's p2p path: batch_isend_irecv(list of P2POp) -> list of requests.

    isend/irecv themselves stay unwrapped: P2POp accepts only torch's own functions.
    """
    import torch.distributed as dist

    def received(ops) -> None:
        for op in ops:
            if op.op is dist.distributed_c10d.irecv:
                _fill_received(op.tensor)

    def counted(ops) -> None:
        for op in ops:
            COUNTS["calls"] += 1
            if not _state["zero_bytes"]:
                sent = op.op is not dist.distributed_c10d.irecv
                COUNTS["p2p_sent" if sent else "p2p_recv"] += (
                    op.tensor.numel() * op.tensor.element_size()
                )

    def batch_isend_irecv(p2p_op_list):
        mode, device = _state["mode"], _state["device"]
        if _state["count"] and mode is not None and mode is not Mode.NOCOMM:
            counted(p2p_op_list)
        if mode is None or (mode is Mode.OVERLAP and not _state["zero_bytes"]):
            return original(p2p_op_list)
        if mode is Mode.NOCOMM:
            received(p2p_op_list)
            return [DONE for _ in p2p_op_list]
        ops = p2p_op_list
        if _state["zero_bytes"]:
            received(p2p_op_list)
            ops = [dist.P2POp(op.op, op.tensor.new_empty(0), op.peer, op.group, op.tag)
                   for op in p2p_op_list]  # fmt: skip
        if mode is Mode.OVERLAP:  # a control on the overlap path
            return [req or DONE for req in original(ops)]

        def launch():
            for req in original(ops):
                if req is not None:
                    req.wait()

        in_stream_order(launch, device)  # SEQUENTIAL: the batch between compute
        return [DONE for _ in p2p_op_list]

    batch_isend_irecv.__wrapped__ = original
    batch_isend_irecv.routed_by_mode = True
    return batch_isend_irecv


def install_collective_modes() -> None:
    """Wrap torch.distributed's collectives (idempotent); call before the framework starts.
    Under `--emulate-world` every call, in every mode, goes to the emulated traffic."""
    import torch.distributed as dist

    from artifact.rank import emulation

    _state["emulated"] = emulation.world() is not None

    for name in (*_GATHERS, *_SCATTERS, *_IN_PLACE, *_LISTS):
        fn = getattr(dist, name, None)
        if fn is not None and not getattr(fn, "routed_by_mode", False):
            setattr(dist, name, _wrap(name, fn))
    if not getattr(dist.batch_isend_irecv, "routed_by_mode", False):
        dist.batch_isend_irecv = _wrap_batch_p2p(dist.batch_isend_irecv)


class collectives_in:
    """`with collectives_in(Mode.SEQUENTIAL, device): train_step()`; `zero_bytes` routes
    every collective through its zero-byte stand-in (the control phases)."""

    def __init__(self, mode: Mode, device: torch.device, zero_bytes: bool = False):
        self.mode, self.device, self.zero_bytes = mode, device, zero_bytes

    def __enter__(self):
        self._saved = dict(_state)
        _state.update(mode=self.mode, device=self.device, zero_bytes=self.zero_bytes)
        return self

    def __exit__(self, *exc):
        _state.update(self._saved)


def collectives_for(phase: str, device: torch.device) -> collectives_in:
    """The routing a phase's step runs under: its mode, and zero bytes for a control."""
    return collectives_in(mode_of(phase), device, moves_zero_bytes(phase))
