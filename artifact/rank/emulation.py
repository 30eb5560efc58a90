"""`--emulate-world W`: rank 0 of a W-rank job, alone on one device (issue 31).

The process joins torch's fake process group at world size W
(`init_process_group("fake", store=FakeStore(), rank=0, world_size=W)`), so DeepSpeed
ZeRO-3 and FSDP2 shard the model, the gradients and the optimizer state exactly as
rank 0 of a W-rank job does, and run rank 0's micro-batches and schedule. The fake
group moves nothing; the collectives the modes route (artifact.rank.modes) come here
instead, and each moves the bytes rank 0 would move in a ring at W:

- all-gather and reduce-scatter: (W-1)/W of the full (gathered) buffer;
- all-reduce: 2(W-1)/W of the buffer (a reduce-scatter, then an all-gather);
- broadcast and reduce: the buffer once.

The bytes are device-side copies on a communication stream of their own, which also
fill the outputs with finite data (rank 0's own values in every peer's slot, as
`nocomm`'s stand-in does), so an fp16 loss scale sees no overflow. On a GPU each
collective is paced to the link's bandwidth (emulated.LINK_GBS, or `--link-gbps`); on a CPU
the copies run plainly, in the calling thread. The flag's checks, link defaults and
labels live in artifact.core.emulated (no torch there: the CLI checks before torch
loads). Every byte is counted in `TRAFFIC` (the seam tests/test_emulation.py reads).

`--stand-in nccl-shaped` moves the same ring bytes with one persistent kernel of C CTAs
a collective instead (artifact.workloads.nccl_shaped: NCCL's shape, holding C SMs for the
whole collective and moving its reads, writes and reductions through memory, paced to the
link inside the kernel); C is NCCL's channel count for the GPU model, or `--comm-ctas`.
Collectives it has no plan for (list forms, integer dtypes, buffers not divisible by W)
fall back to the copies, and are counted in FALLBACKS.

What emulation cannot show: NVLink's and NCCL's own protocol (the copy stand-in uses many
SMs for a short time; the NCCL-shaped one is checked against co-located NCCL ranks by
the contention map), the peers' load on the link and on the memory system, and a
pipeline's bubble (stage 0 never waits for a real stage 1).
"""

from __future__ import annotations

import math
from collections import Counter

import torch

from artifact.core import emulated
from artifact.core.errors import ArtifactError
from artifact.measure.kernels import EMULATED_MARK
from artifact.measure.timing import spin_cycles_per_s, timed

_world: list[int | None] = [None]  # the emulated world size once joined, else None
_link: list[float | None] = [None]  # bytes per second on a GPU; None: not paced (CPU)
# the stand-in (emulated.STAND_INS) and its CTAs (the NCCL-shaped one's)
_stand_in: dict = {"name": emulated.DEFAULT_STAND_IN, "ctas": None}
# bytes rank 0 moved, by collective kind: the seam that tests count through
TRAFFIC: Counter[str] = Counter()
# collectives the NCCL-shaped stand-in left to the copies, by kind and why
FALLBACKS: Counter[str] = Counter()


def join(
    world: int,
    device: torch.device,
    link_given: float | None = None,
    stand_in: str | None = None,
    ctas_given: int | None = None,
) -> None:
    """Join the fake process group as rank 0 of `world` (instead of a real group); on a
    GPU, traffic is paced to `link_given` GB/s or the GPU model's default link."""
    import torch.distributed as dist
    from torch.testing._internal.distributed.fake_pg import FakeStore

    gbs = None
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else None
    if device.type == "cuda":  # refused before the group exists when the GPU is unknown
        gbs = emulated.link_gbs(name, link_given)
    stand_in = stand_in or emulated.DEFAULT_STAND_IN
    ctas = None
    if stand_in == "nccl-shaped":  # on a CPU the plan runs as torch ops: no CTAs
        ctas = emulated.comm_ctas(name, world, ctas_given) if name else ctas_given
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=world)
    _world[0] = world
    _link[0] = gbs * 1e9 if gbs else None
    _stand_in.update(name=stand_in, ctas=ctas)


def stand_in() -> tuple[str, int | None]:
    """The stand-in that moves the emulated bytes, and its CTAs (None: copies)."""
    return _stand_in["name"], _stand_in["ctas"]


def moved_bytes() -> int:
    """Every byte the emulated traffic has moved in this process (0 in a real run)."""
    return sum(TRAFFIC.values())


def link_gbps() -> float | None:
    """The link the copies are paced to, GB/s one way (None: not paced, a CPU)."""
    return _link[0] / 1e9 if _link[0] else None


def world() -> int | None:
    """The emulated world size, or None in a real run."""
    return _world[0]


def has_peers() -> bool:
    """Whether other ranks exist to agree with (no: a single process, or emulation)."""
    import torch.distributed as dist

    return dist.is_initialized() and dist.get_world_size() > 1 and _world[0] is None


# --- the traffic ---------------------------------------------------------------------

_streams: dict[torch.device, torch.cuda.Stream] = {}


def comm_stream(device: torch.device):
    """The stream the copies run on (one a device, as NCCL's); None on a CPU."""
    if device.type != "cuda":
        return None
    if device not in _streams:
        _streams[device] = torch.cuda.Stream(device)
    return _streams[device]


class _StreamWork:
    """A work handle: wait() makes the waiting stream wait for the copies (no host wait)."""

    def __init__(self, event):
        self.event = event

    def wait(self, timeout=None) -> bool:
        torch.cuda.current_stream().wait_event(self.event)
        return True

    def is_completed(self) -> bool:
        return self.event.query()


def _moves(kind: str, nbytes: int) -> None:
    TRAFFIC[kind] += nbytes


# One kernel a collective where it can be (NCCL launches one): ZeRO-3 issues hundreds of
# collectives a step and its step is host-bound, so every extra launch lengthens it
# (docs/history.md, "Facts behind the code's settings").


def _gather(out: torch.Tensor, inp: torch.Tensor, w: int) -> None:
    """Every slot the shard, in one copy: own slot a local copy, each peer's slot one
    received shard (W-1 of W counted)."""
    flat = inp.reshape(1, -1)
    out.view(w, -1).copy_(flat.expand(w, -1))
    _moves("all_gather", (w - 1) * flat.numel() * flat.element_size())


def _scatter(out: torch.Tensor, inp: torch.Tensor, w: int) -> None:
    """The W-1 peers' chunks read and reduced into scratch (what rank 0 receives), then
    rank 0's own unreduced chunk, which the output keeps (nocomm's values): two kernels."""
    chunks, dst = inp.reshape(w, -1), out.view(-1)
    torch.sum(chunks[1:], dim=0, out=torch.empty_like(dst))
    _moves("reduce_scatter", (w - 1) * dst.numel() * dst.element_size())
    dst.copy_(chunks[0])


def _all_reduce(t: torch.Tensor, w: int) -> None:
    """2(W-1) chunks of 1/W each through a scratch chunk; the local values stay."""
    flat = t.reshape(-1)
    n = -(-flat.numel() // w)  # ceil: the ring's chunk
    scratch = flat.new_empty(n)
    for k in range(2 * (w - 1)):
        piece = flat[(k % w) * n : (k % w + 1) * n]
        scratch[: piece.numel()].copy_(piece)
        _moves("all_reduce", piece.numel() * piece.element_size())


def _once(kind: str, t: torch.Tensor) -> None:
    scratch = torch.empty_like(t)
    scratch.copy_(t)
    _moves(kind, t.numel() * t.element_size())


def _copies(name: str, a: dict, w: int, gathers, scatters) -> list[torch.Tensor]:
    """Run the copies for collective `name` (its arguments by name); the tensors touched."""
    if name in gathers:
        _gather(a["output_tensor"], a["input_tensor"], w)
        return [a["output_tensor"], a["input_tensor"]]
    if name in scatters:
        _scatter(a["output"], a["input"], w)
        return [a["output"], a["input"]]
    if name == "all_reduce":
        _all_reduce(a["tensor"], w)
        return [a["tensor"]]
    if name in ("broadcast", "reduce"):
        _once(name, a["tensor"])
        return [a["tensor"]]
    if name == "all_gather":  # list form: one tensor a rank
        outs = a["tensor_list"]
        outs[0].copy_(a["tensor"])
        for o in outs[1:]:
            o.copy_(a["tensor"])
            _moves("all_gather", o.numel() * o.element_size())
        return [*outs, a["tensor"]]
    if name == "reduce_scatter":
        for chunk in a["input_list"][1:]:
            a["output"].copy_(chunk)
            _moves("reduce_scatter", chunk.numel() * chunk.element_size())
        a["output"].copy_(a["input_list"][0])
        return [a["output"], *a["input_list"]]
    raise ArtifactError(f"emulation has no traffic for collective {name!r}")


# the pacer times a collective's copies repeated until about this many bytes have moved
# (at most PROBE_MAX_REPEATS times): long enough to time from the host
PROBE_BYTES, PROBE_MAX_REPEATS = 1 << 28, 64


def _first_tensor(a: dict) -> torch.Tensor:
    for v in a.values():
        if isinstance(v, torch.Tensor):
            return v
        if isinstance(v, list) and v and isinstance(v[0], torch.Tensor):
            return v[0]
    raise ArtifactError("emulated collective without a tensor argument")


class _Pacer:
    """Stretches a stream's copies to the link's time with a spinning one-thread kernel
    (torch.cuda._sleep). The copies themselves run at the memory's speed, so the pad is
    the link's time for the bytes minus the copies' own, at the rate the same kernels
    reach for that collective and dtype (timed once each: a gather's broadcast copy and a
    reduce-scatter's sum run slower than a plain copy, so a pad calibrated on a plain copy
    let collectives overrun the link's time; docs/history.md)."""

    def __init__(self, device: torch.device):
        self.device = device
        self.cycles_per_s = spin_cycles_per_s(device)
        self.rates: dict[tuple, float] = {}  # (collective, dtype, size, W) -> bytes per second

    def rate(self, name: str, a: dict, w: int, gathers, scatters) -> float:
        """Bytes per second that `_copies` moves for this collective at W, its dtype and
        size: timed once each on the collective's own tensors (its real copies follow and
        overwrite what the probe wrote). It synchronises the device, so the first such
        collective of a run should come in a warm-up step, which is not measured. Timed
        from the host: for a small collective the launches may take longer than the
        copies, the rate reads low and the pad is too short (its bytes are few: GPT-3
        1.3B's step as a whole was paced to 447 of 450 GB/s)."""
        like = _first_tensor(a)
        key = (name, like.dtype, like.numel(), w)
        if key not in self.rates:
            before = TRAFFIC.copy()

            def run():
                _copies(name, a, w, gathers, scatters)

            run()  # warm-up
            once = moved_bytes() - sum(before.values())
            k = min(PROBE_MAX_REPEATS, max(1, -(-PROBE_BYTES // max(once, 1))))
            seconds = min(timed(lambda: [run() for _ in range(k)], self.device) for _ in range(3))
            TRAFFIC.clear()
            TRAFFIC.update(before)  # the probe moved none of the run's bytes
            self.rates[key] = once * k / seconds if once else math.inf  # nothing to move
        return self.rates[key]

    def pad(self, nbytes: int, link_bytes_per_s: float, copy_bytes_per_s: float) -> None:
        extra_s = nbytes / link_bytes_per_s - nbytes / copy_bytes_per_s
        if extra_s > 0:
            torch.cuda._sleep(int(extra_s * self.cycles_per_s))


_pacers: dict[torch.device, _Pacer] = {}


def traffic(name: str, a: dict, device: torch.device, gathers, scatters, zero_bytes=False):
    """Launch rank 0's traffic for one collective; a handle on a GPU, None on a CPU.
    `zero_bytes` (the controls): the same stream order, event and handle, no copies."""
    import torch.distributed as dist

    w = dist.get_world_size(a.get("group"))
    with torch.profiler.record_function(EMULATED_MARK):  # the trace counts it as communication
        return _traffic(name, a, device, w, gathers, scatters, zero_bytes)


def _traffic(name: str, a: dict, device: torch.device, w: int, gathers, scatters, zero_bytes):
    if _stand_in["name"] == "nccl-shaped":
        shaped = _shaped_buffers(name, a, w, gathers, scatters)
        if shaped is not None:
            return _shaped(shaped, device, w, zero_bytes)
    stream = comm_stream(device)
    if stream is None:  # CPU: plain copies, now
        if not zero_bytes:
            _copies(name, a, w, gathers, scatters)
        return None
    if _link[0] and device not in _pacers:
        _pacers[device] = _Pacer(device)  # once, before any copy is queued
    # the copies' own rate, probed before they are queued (once per collective, dtype and
    # size; a control moves nothing, so it probes nothing)
    paced = _link[0] and not zero_bytes
    rate = _pacers[device].rate(name, a, w, gathers, scatters) if paced else None
    stream.wait_stream(torch.cuda.current_stream(device))  # inputs are ready first
    before, touched = moved_bytes(), []
    with torch.cuda.stream(stream):
        if not zero_bytes:
            touched = _copies(name, a, w, gathers, scatters)
            if paced:
                _pacers[device].pad(moved_bytes() - before, _link[0], rate)
        event = torch.cuda.Event()
        event.record(stream)
    for t in touched:  # the caching allocator must not hand these out while copies run
        t.record_stream(stream)
    return _StreamWork(event)


# --- the NCCL-shaped stand-in ---------------------------------------------------------


def _shaped_buffers(name: str, a: dict, w: int, gathers, scatters):
    """(kind, buffers, chunk elements, in place, average) for the NCCL-shaped kernel, or
    None where it has no plan and the copies stand in (FALLBACKS says why)."""
    import torch.distributed as dist

    if name in gathers:
        kind, out, inp = "all_gather", a["output_tensor"], a["input_tensor"]
        chunk, bufs = inp.numel(), {"in": inp, "out": out}
        fits = out.numel() == w * chunk
    elif name in scatters:
        kind, out, inp = "reduce_scatter", a["output"], a["input"]
        chunk, bufs = out.numel(), {"in": inp, "out": out}
        fits = inp.numel() == w * chunk
    elif name == "all_reduce":
        kind, t = "all_reduce", a["tensor"]
        chunk, bufs = t.numel() // w, {"out": t}
        fits = t.numel() == w * chunk
    elif name in ("broadcast", "reduce"):
        kind, t = name, a["tensor"]
        chunk, bufs, fits = t.numel(), {"in": t}, True
    else:
        FALLBACKS[f"{name}: list form"] += 1
        return None
    first = next(iter(bufs.values()))
    why = (
        "not a floating-point dtype"
        if not first.dtype.is_floating_point
        else "buffers not W equal chunks"
        if not fits or chunk == 0
        else "mixed dtypes"
        if any(b.dtype != first.dtype for b in bufs.values())
        else "not contiguous"
        if any(not b.is_contiguous() for b in bufs.values())
        else None
    )
    if why:
        FALLBACKS[f"{name}: {why}"] += 1
        return None
    in_place = kind == "all_gather" and inp.data_ptr() == out.data_ptr()
    average = kind in ("reduce_scatter", "all_reduce") and a.get("op") == dist.ReduceOp.AVG
    return kind, bufs, chunk, in_place, average


_counters: dict = {}


def _shaped(shaped, device: torch.device, w: int, zero_bytes: bool):
    """One persistent kernel for the collective, on the communication stream (GPU), or its
    plan as torch ops now (CPU: no stream, nothing paced)."""
    from artifact.workloads import nccl_shaped

    kind, bufs, chunk, in_place, average = shaped
    first = next(iter(bufs.values()))
    # the ring's bytes on the link, as the copies count them (module docstring)
    ring = {"all_gather": w - 1, "reduce_scatter": w - 1, "all_reduce": 2 * (w - 1)}
    link = chunk * first.element_size() * ring.get(kind, 1)
    steps = nccl_shaped.plan(kind, w, in_place=in_place, average=average)
    ctas = _stand_in["ctas"] or 1
    stream = comm_stream(device)
    if stream is not None:
        stream.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(stream):  # None: a no-op
        if not zero_bytes:
            bufs = {**bufs, "fifo": first.new_empty(chunk)}
            duration = int(link / _link[0] * 1e9) if _link[0] else 0
            nccl_shaped.launch(bufs, steps, chunk, ctas, duration, counters=_counter(device, ctas))
            _moves(kind, link)
            for t in bufs.values() if stream is not None else ():
                t.record_stream(stream)  # the allocator must not hand these out while it runs
        if stream is None:
            return None
        event = torch.cuda.Event()
        event.record(stream)
    return _StreamWork(event)


def _counter(device: torch.device, ctas: int):
    """The kernel's byte counters for this device, summed over the run (shaped_bytes)."""
    from artifact.workloads import nccl_shaped

    if device not in _counters:
        _counters[device] = nccl_shaped.Counters(device, ctas)
    return _counters[device]


def shaped_bytes(device: torch.device) -> tuple[int, int, int]:
    """(read, written, CTAs seen) by the NCCL-shaped kernel on `device` so far (syncs)."""
    return _counters[device].read() if device in _counters else (0, 0, 0)
