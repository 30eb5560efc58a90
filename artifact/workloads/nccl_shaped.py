"""The NCCL-shaped stand-in: one persistent kernel a collective, shaped as NCCL's ring.

NCCL runs one CTA per channel for the whole collective and moves a ring's chunks through
HBM; a copy kernel takes many SMs for a short time. This kernel (Triton: it ships with
torch's CUDA wheels) takes C CTAs of 512 threads (NCCL's Simple and LL protocols), each
holding its SM until the collective ends, and does rank 0's part of a ring at W:

- a copy step (a chunk sent and a chunk received): one read, one write;
- a reduce step (a chunk received and reduced with rank 0's own): two reads, one write.
  By the ring's symmetry what rank 0 sends is what it receives next, so a reduce step's
  write is both the reduced chunk sent and the next chunk received.

Per collective of a buffer of W chunks of c bytes (`plan`):
    all-gather      copy own shard, then W-1 copy steps       reads W c,        writes W c
    reduce-scatter  one copy, then W-1 reduce steps           reads (2W-1) c,   writes W c
    all-reduce      the reduce-scatter, then W-1 copy steps   reads (3W-2) c,   writes (2W-1) c
    broadcast, reduce  the buffer once                        reads W c,        writes W c
The reduction sums the W chunks of rank 0's buffer (as many operands as the ring has ranks;
AVG divides by W). Between steps each CTA spins on the GPU's global timer until the
step's deadline (`deadlines`), pacing the collective to the link's time for its ring bytes
(emulated.ring_bytes). With `move_bytes=False` it only holds the SMs for that time (the
contention map's "SMs held, no bytes").

On a CPU (or under TRITON_INTERPRET=1) the same plan runs: as torch ops without Triton,
through the Triton interpreter with it; pacing needs the GPU's timer and is off there.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

THREADS = 512  # NCCL's threads a CTA for the Simple and LL protocols (640 for LL128)
# elements a CTA moves per inner iteration: 32 a thread, so enough bytes are in flight for
# one CTA to approach NCCL's rate a channel (at 8 a thread, 16 CTAs moved 254 GB/s of HBM
# on an H100: latency-bound)
BLOCK = 16384
# loads in flight a CTA across inner iterations (Triton's software pipelining of tl.range):
# 1 issues a block's loads only after the last block's stores
STAGES = 1

COPY, REDUCE = 0, 1


@dataclass(frozen=True)
class Step:
    """dst <- src (COPY) or dst <- (src + aux) * scale (REDUCE); operands are (buffer, chunk)."""

    op: int
    src: tuple[str, int]
    dst: tuple[str, int]
    aux: tuple[str, int] | None = None
    scale: float = 1.0


def plan(kind: str, w: int, in_place: bool = False, average: bool = False) -> list[Step]:
    """Rank 0's steps for one collective at W. Buffers: 'in', 'out' (W chunks each, or one
    for a gather's input and a scatter's output), 'fifo' (one chunk of scratch)."""
    last = 1.0 / w if average else 1.0
    if kind == "all_gather":
        first = [] if in_place else [Step(COPY, ("in", 0), ("out", 0))]
        return first + [Step(COPY, ("out", s - 1), ("out", s)) for s in range(1, w)]
    if kind in ("reduce_scatter", "all_reduce"):
        src = "in" if kind == "reduce_scatter" else "out"
        order = [*range(1, w), 0]  # chunks in ring order; rank 0's own one last
        steps = [Step(COPY, (src, order[0]), ("fifo", 0))]
        for k, chunk in enumerate(order[1:], 1):
            final = k == w - 1
            dst = ("out", 0) if final else ("fifo", 0)
            steps.append(Step(REDUCE, ("fifo", 0), dst, (src, chunk), last if final else 1.0))
        if kind == "all_reduce":
            steps += [Step(COPY, ("out", s - 1), ("out", s)) for s in range(1, w)]
        return steps
    if kind in ("broadcast", "reduce"):
        return [Step(COPY, ("in", 0), ("fifo", 0))]
    raise ValueError(f"no NCCL-shaped plan for collective {kind!r}")


def for_rank(steps: list[Step], rank: int) -> list[Step]:
    """The steps on rank `rank`'s own buffers ('out' -> 'out1', ...): one kernel doing
    several co-located ranks' rings."""

    def ren(ref):
        return None if ref is None else (f"{ref[0]}{rank}", ref[1])

    return [Step(s.op, ren(s.src), ren(s.dst), ren(s.aux), s.scale) for s in steps]


def bytes_of(steps: list[Step], chunk_bytes: int) -> tuple[int, int]:
    """(read, written) bytes through memory: the formula the kernel's counters must meet."""
    reads = sum(2 if s.op == REDUCE else 1 for s in steps)
    return reads * chunk_bytes, len(steps) * chunk_bytes


def deadlines(n_steps: int, duration_ns: int) -> list[int]:
    """Each step's deadline after the kernel's start: the collective's time spread evenly."""
    if n_steps == 0:
        return []
    return [duration_ns * (k + 1) // n_steps for k in range(n_steps)]


def pace(
    duration_ns: int,
    n_steps: int,
    step: Callable[[int], None],
    clock: Callable[[], int] = time.perf_counter_ns,
) -> list[int]:
    """Run `step(k)` for each step, waiting after each until its deadline on `clock` (the
    seam the tests drive); returns the clock readings at which each step was released."""
    start, released = clock(), []
    for k, due in enumerate(deadlines(n_steps, duration_ns)):
        step(k)
        now = clock()
        while now - start < due:
            now = clock()
        released.append(now - start)
    return released


def _interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET") == "1"


def _kernel():
    """The Triton kernel, compiled on first use (importing Triton is slow)."""
    # Over 60 lines: the kernel's body is one Triton function, defined where it compiles.
    global _KERNEL
    if _KERNEL is not None:
        return _KERNEL
    import triton
    import triton.language as tl

    @triton.jit
    def _now():
        return tl.inline_asm_elementwise(
            "mov.u64 $0, %globaltimer;", "=l", [], dtype=tl.int64, is_pure=False, pack=1
        )

    @triton.jit
    def standin_ring(
        base,
        steps,
        n_steps,
        chunk,
        counts,
        seen,
        due_ns,
        ELEM: tl.constexpr,
        BLOCK: tl.constexpr,
        MOVE: tl.constexpr,
        PACE: tl.constexpr,
        STAGES: tl.constexpr,
    ):
        # steps: n_steps rows of (op, src, aux, dst) element offsets from `base`, and a scale
        pid = tl.program_id(0)
        ctas = tl.num_programs(0)
        tl.store(seen + pid, 1)
        per = tl.cdiv(chunk, ctas)
        lo = pid * per
        hi = tl.minimum(lo + per, chunk)
        mine = tl.maximum(hi - lo, 0)
        if PACE:
            start = _now()
        for k in range(n_steps):
            row = steps + k * 5
            op = tl.load(row)
            src = tl.load(row + 1)
            aux = tl.load(row + 2)
            dst = tl.load(row + 3)
            scale = tl.load(row + 4).to(tl.float32) / 1e6
            if MOVE:
                # one loop a step kind, no branch inside: loads under a branch are not pipelined
                if op == 1:
                    for off in tl.range(lo, hi, BLOCK, num_stages=STAGES):
                        idx = off + tl.arange(0, BLOCK)
                        mask = idx < hi
                        x = tl.load(base + src + idx, mask=mask).to(tl.float32)
                        x = (x + tl.load(base + aux + idx, mask=mask).to(tl.float32)) * scale
                        tl.store(base + dst + idx, x.to(base.dtype.element_ty), mask=mask)
                else:
                    for off in tl.range(lo, hi, BLOCK, num_stages=STAGES):
                        idx = off + tl.arange(0, BLOCK)
                        mask = idx < hi
                        x = tl.load(base + src + idx, mask=mask)
                        tl.store(base + dst + idx, x, mask=mask)
                reads = tl.where(op == 1, 2, 1).to(tl.int64) * mine * ELEM
                tl.atomic_add(counts, reads)
                tl.atomic_add(counts + 1, mine.to(tl.int64) * ELEM)
            if PACE:
                due = tl.load(due_ns + k)
                now = _now()
                while now - start < due:
                    now = _now()

    _KERNEL = standin_ring  # the name the trace's classifier knows (measure.kernels)
    return standin_ring


_KERNEL = None
SCALE_UNIT = 1_000_000  # scales travel as int64 millionths (1/W is exact enough)


def _offsets(buffers: dict[str, torch.Tensor], steps: list[Step], chunk: int) -> torch.Tensor:
    """The steps as rows of element offsets from the first buffer's start (one base pointer:
    Triton indexes every buffer from it, so all must share a dtype)."""
    base = next(iter(buffers.values()))
    size = base.element_size()

    def at(ref):
        if ref is None:
            return 0
        name, k = ref
        delta = buffers[name].data_ptr() - base.data_ptr()
        assert delta % size == 0, "buffers must be aligned to their element size"
        return delta // size + k * chunk

    rows = [[s.op, at(s.src), at(s.aux), at(s.dst), round(s.scale * SCALE_UNIT)] for s in steps]
    return torch.tensor(rows, dtype=torch.int64, device=base.device).reshape(-1)


class Counters:
    """Bytes the kernel read and wrote, and the CTAs it ran, summed on the device."""

    def __init__(self, device: torch.device, ctas: int):
        self.moved = torch.zeros(2, dtype=torch.int64, device=device)
        self.seen = torch.zeros(max(ctas, 1), dtype=torch.int32, device=device)

    def read(self) -> tuple[int, int, int]:
        r, w = self.moved.tolist()
        return r, w, int(self.seen.sum())


def launch(
    buffers: dict[str, torch.Tensor],
    steps: list[Step],
    chunk: int,
    ctas: int,
    duration_ns: int = 0,
    move_bytes: bool = True,
    counters: Counters | None = None,
    block: int = BLOCK,
    stages: int = STAGES,
) -> Counters:
    """Run the steps on `ctas` CTAs (the current stream), paced over `duration_ns` on a GPU.
    Without Triton on a CPU the steps run as torch ops, unpaced."""
    base = next(iter(buffers.values()))
    counters = counters or Counters(base.device, ctas)
    if base.device.type != "cuda" and not _interpreting():
        _torch_steps(buffers, steps, chunk, move_bytes, counters)
        return counters
    pace_it = duration_ns > 0 and base.device.type == "cuda" and not _interpreting()
    due = torch.tensor(
        deadlines(len(steps), duration_ns) or [0], dtype=torch.int64, device=base.device
    )
    rows = _offsets(buffers, steps, chunk)
    if not steps or ctas < 1:
        return counters
    _kernel()[(ctas,)](
        base,
        rows,
        len(steps),
        chunk,
        counters.moved,
        counters.seen,
        due,
        ELEM=base.element_size(),
        BLOCK=block,
        MOVE=move_bytes,
        PACE=pace_it,
        STAGES=stages,
        num_warps=THREADS // 32,
    )
    return counters


def _torch_steps(buffers, steps, chunk, move_bytes, counters) -> None:
    """The plan as torch ops (a CPU without Triton): the same bytes, counted the same way."""
    if not move_bytes:
        return
    size = next(iter(buffers.values())).element_size()

    def view(ref):
        name, k = ref
        return buffers[name].reshape(-1)[k * chunk : (k + 1) * chunk]

    for s in steps:
        x = view(s.src).float()
        if s.op == REDUCE:
            x = (x + view(s.aux).float()) * s.scale
        view(s.dst).copy_(x)
    reads, writes = bytes_of(steps, chunk * size)
    counters.moved += torch.tensor([reads, writes], dtype=torch.int64)  # no CTA ran: seen stays 0
