"""Fig. 8's microbenchmark: square matmuls beside a large all-reduce, on one rank.

Phases of one iteration (all ranks run the same phase at the same time):
    nocomm      the matmuls alone (compute in isolation)
    comm_alone  the collectives alone
    sequential  the collectives, each ordered before the matmuls by stream order (artifact.rank.modes)
    overlap     the collectives on their stream while the matmuls run on theirs
and, where the collective moves data, the zero-byte controls `overlap_control` and
`sequential_control` (the same code paths on an empty buffer), and the A/A repeat
`overlap_repeat` (artifact.rank.modes).

The collective (`comm`):
    allreduce    a SUM all-reduce. On one GPU it moves no data and launches no kernel.
    onerank-avg  an AVG all-reduce. On one GPU NCCL runs its one-rank reduction kernel,
                 which reads and writes the whole buffer on SMs: a proxy that contends
                 for SMs and memory bandwidth as NCCL's kernels do.
    copy         a device-to-device copy of the same size on a side stream. The copy
                 engine moves the bytes: a proxy that contends for bandwidth, not SMs.
    spin         SMs held, no bytes: the NCCL-shaped kernel on `ctas` CTAs that only
                 spins, for as long as rank 0's ring all-reduce of the buffer takes on
                 the link at `ranks` (artifact.workloads.nccl_shaped).
    nccl-shaped  the NCCL-shaped stand-in: rank 0's ring all-reduce at `ranks` on `ctas`
                 CTAs, paced to the link (or, with `pace_ms`, to that time a collective).
    coloc        `ranks` real NCCL ranks co-located on this GPU, one thread a rank
                 (artifact.rank.colocate), `max_ctas` CTAs in all.
Results from a proxy or stand-in are labelled so.

The compute (`compute`): square GEMMs (compute-bound) or an elementwise add over large
vectors (memory-bound), so the contention experiment can sweep arithmetic intensity.

V2's delay injection (`delay_us` > 0): after every collective the communication chain
waits a known time before the next one may start, without touching the compute chain:
a spin kernel (torch.cuda._sleep, one thread block) on a side stream on a GPU, a
sleep in the thread that issues the collectives on a CPU. The trace marks the delay
("delay" category), so the injected time is measured, not assumed.
"""

from __future__ import annotations

import contextlib
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import torch
import torch.distributed as dist

from artifact.core.phases import MICROBENCH_PHASES as PHASES
from artifact.measure.kernels import DELAY_MARK
from artifact.measure.timing import SpanTimer, spin_cycles_per_s, synchronize, timed
from artifact.rank.modes import Mode, issue, mode_of, moves_zero_bytes
from artifact.workloads.precision import dtype_of, matmul_precision

COMMS = ("allreduce", "onerank-avg", "copy", "spin", "nccl-shaped", "coloc")
# queued on a stream of the bench's own, ahead of the compute they overlap. Co-located NCCL
# too: issued from the compute stream, each collective waited for the GEMM before it and
# lost the race for SMs to the GEMM after it (one H100: overlap fraction 0.20 and 0.07
# against its twin's 0.997), so the validation compared two launch orders, not two kernels
SIDE_STREAM_COMMS = ("copy", "spin", "nccl-shaped", "coloc")
COMPUTES = ("gemm", "add")
ORDERS = ("holder-first", "compute-first")


@dataclass(frozen=True)
class MicrobenchSpec:
    matmul_size: int
    precision: str
    comm_bytes: int
    matmuls_per_iter: int
    comm: str  # one of COMMS
    compute: str = "gemm"  # one of COMPUTES
    add_numel: int = 1 << 28  # elements of each add operand (compute "add")
    delay_us: float = 0.0  # V2: injected after every collective on the communication chain
    max_ctas: int = 0  # NCCL CTA limit of the collectives' communicator (0: NCCL's default)
    interleave: bool = False  # spread the collectives over the compute units (contention map)
    ctas: int = 0  # CTAs of the spin and NCCL-shaped kernels
    ranks: int = 0  # W of the NCCL-shaped ring, the spin's duration, and the co-located ranks
    link_gbps: float = 0.0  # the link the spin and the stand-in are paced to (0: unpaced)
    pace_ms: float = 0.0  # or this time a collective (the stand-in's twin of co-located NCCL)
    copies: int = 1  # rings one NCCL-shaped kernel does (the twin: every co-located rank's)
    # the contention map's order and mitigation axes (artifact.core.mechanisms)
    order: str = "holder-first"  # or compute-first: each collective after the compute it overlaps
    nccl_policy: str = ""  # NCCL's CTA policy for the collectives' communicators (default: NCCL's)
    cap_ctas: int = 0  # NCCL's max_ctas a communicator, min left to NCCL (0: NCCL's default)
    carveout: int = 0  # SMs torch's matmuls leave free (torch._C._set_sm_carveout_experimental)

    @property
    def moves_no_data(self) -> bool:
        return self.comm == "allreduce" and dist.get_world_size() == 1

    @property
    def matmul_flops(self) -> int:
        return 2 * self.matmul_size**3

    @property
    def unit_flops(self) -> int:
        """Floating-point operations of one compute unit (one GEMM, or one add)."""
        return self.matmul_flops if self.compute == "gemm" else self.add_numel

    def unit_bytes(self, element_size: int) -> int:
        """Fewest bytes one compute unit moves through memory (each operand once)."""
        n = self.matmul_size**2 if self.compute == "gemm" else self.add_numel
        return 3 * n * element_size

    def intensity(self, element_size: int) -> float:
        """Arithmetic intensity (FLOP per byte) of one compute unit."""
        return self.unit_flops / self.unit_bytes(element_size)


class Microbench:
    """Buffers and the four phases; `comm_repeats` is set by `calibrate`."""

    def __init__(self, spec: MicrobenchSpec, device: torch.device, seed: int = 0):
        if spec.comm not in COMMS:
            raise ValueError(f"unknown collective {spec.comm!r}; accepted: {', '.join(COMMS)}")
        if spec.compute not in COMPUTES:
            raise ValueError(f"unknown compute {spec.compute!r}; accepted: {', '.join(COMPUTES)}")
        if spec.order not in ORDERS:
            raise ValueError(f"unknown launch order {spec.order!r}; accepted: {', '.join(ORDERS)}")
        if spec.comm in ("copy", "spin") and device.type != "cuda":
            raise ValueError(
                f"the {spec.comm} proxy needs a GPU (it stands in for a one-GPU all-reduce)"
            )
        self.spec, self.device = spec, device
        gen = torch.Generator(device=device).manual_seed(seed)
        dt = dtype_of(spec.precision)
        shape = (spec.matmul_size,) * 2 if spec.compute == "gemm" else (spec.add_numel,)
        self.a = torch.randn(shape, device=device, dtype=dt, generator=gen)
        self.b = torch.randn(shape, device=device, dtype=dt, generator=gen)
        self.c = torch.empty(shape, device=device, dtype=dt)
        numel = spec.comm_bytes // 4
        self.comm_buf = torch.randn(numel, device=device, generator=gen)
        self.copy_dst = torch.empty_like(self.comm_buf) if spec.comm == "copy" else None
        # The communication chain runs on a side stream where it must be ordered with
        # something of its own: the copy proxy, or the delay that follows each collective.
        side = device.type == "cuda" and (spec.comm in SIDE_STREAM_COMMS or spec.delay_us > 0)
        self.side_stream = torch.cuda.Stream(device) if side else None
        # On a CPU the delayed chain is a thread: gloo has no streams to order it on.
        self._chain = ThreadPoolExecutor(1) if device.type != "cuda" and spec.delay_us > 0 else None
        delayed_on_gpu = side and spec.delay_us > 0
        # the spin's clock moves with power and temperature: the delay actually injected is
        # read back from the trace, not taken from this
        self._spin_cycles = (
            spin_cycles_per_s(device) * spec.delay_us * 1e-6 if delayed_on_gpu else 0
        )
        configured = spec.max_ctas or spec.cap_ctas or spec.nccl_policy
        self.group = (
            _configured_group(spec.max_ctas, spec.cap_ctas, spec.nccl_policy)
            if configured and spec.comm == "allreduce"
            else None
        )
        self.coloc = None
        if spec.comm == "coloc":
            from artifact.rank.colocate import Colocated

            self.coloc = Colocated(
                spec.ranks, device, spec.max_ctas or None, spec.cap_ctas, spec.nccl_policy
            )
        self._shaped = (
            _ShapedAllReduce(spec, self.comm_buf) if spec.comm in ("spin", "nccl-shaped") else None
        )
        self.comm_repeats = 1
        # the compute units' own time over a whole timed pass (runner.timed_pass's meter)
        self.compute_timer = SpanTimer(device, "compute_ms")

    def _collective(self, async_op: bool, zero_bytes: bool = False):
        # a control's collective: the same call on an empty slice of the buffer
        buf = self.comm_buf[:0] if zero_bytes else self.comm_buf
        if self.spec.comm == "copy":
            self.copy_dst[: buf.numel()].copy_(buf)
            return None
        if self._shaped is not None:  # a control launches nothing: zero bytes, zero CTAs
            if not zero_bytes:
                self._shaped.launch()
            return None
        if self.coloc is not None:
            return self.coloc.all_reduce(buf, full=self.comm_buf)
        op = dist.ReduceOp.AVG if self.spec.comm == "onerank-avg" else dist.ReduceOp.SUM
        return dist.all_reduce(buf, op=op, group=self.group, async_op=async_op)

    def _launch_comm(self, zero_bytes: bool = False):
        if self._chain is not None:  # CPU with a delay: collective then sleep, in order
            return _FutureWork(self._chain.submit(self._collective_then_sleep))
        if self.side_stream is None:
            return self._collective(async_op=True, zero_bytes=zero_bytes)
        with torch.cuda.stream(self.side_stream):
            work = self._collective(async_op=True, zero_bytes=zero_bytes)
            if work is not None:
                work.wait()  # the side stream (not the compute stream) waits for it
            if self._spin_cycles:
                torch.cuda._sleep(int(self._spin_cycles))
        return None

    def _collective_then_sleep(self) -> None:
        self._collective(async_op=False)
        with torch.profiler.record_function(DELAY_MARK):
            time.sleep(self.spec.delay_us * 1e-6)

    def _compute_unit(self) -> None:
        with (
            self.compute_timer.span(),
            matmul_precision(self.spec.precision),
            sm_carveout(self.spec.carveout),
        ):
            if self.spec.compute == "gemm":
                torch.mm(self.a, self.b, out=self.c)
            else:
                torch.add(self.a, self.b, out=self.c)

    def _comm_batches(self, phase: str) -> list[int]:
        """Collectives to issue before each compute unit, then after the last one.

        Fig. 8 issues them all first. Interleaved (the contention map), they are spread
        over the units, so that small collectives, which finish within the host's launch
        time, run beside compute instead of all before it.
        """
        r, units = self.comm_repeats, self.spec.matmuls_per_iter
        if phase == "comm_alone":
            return [r]  # no compute at all
        if not self.spec.interleave:
            return [r] + [0] * units
        return [r * (i + 1) // units - r * i // units for i in range(units)] + [0]

    def _join_side_stream(self) -> None:
        if self.side_stream is not None:
            torch.cuda.current_stream(self.device).wait_stream(self.side_stream)

    def run_phase(self, phase: str) -> None:
        # comm_alone issues the collectives as overlap does, with no compute beside them;
        # nocomm issues none (artifact.rank.modes makes them no-ops); a control issues them on
        # zero bytes.
        mode = Mode.OVERLAP if phase == "comm_alone" else mode_of(phase)
        zero = moves_zero_bytes(phase)
        batches = self._comm_batches(phase)
        self.compute_timer.next_iteration()
        if self.side_stream is not None:  # queued iterations: not before the last one ends
            self.side_stream.wait_stream(torch.cuda.current_stream(self.device))
        handles = []
        compute_first = self.spec.order == "compute-first" and self.side_stream is not None
        for i, count in enumerate(batches):
            last = i == len(batches) - 1
            if compute_first and not last:
                # the unit is queued first, and its collectives may not start before the
                # unit ahead of it ends: they race it for the SMs it frees (the trace's
                # holder_first_fraction says who won)
                gate = torch.cuda.Event()
                gate.record(torch.cuda.current_stream(self.device))
                self._compute_unit()
                self.side_stream.wait_event(gate)
            handles += [
                issue(mode, lambda: self._launch_comm(zero), self.device, self.side_stream)
                for _ in range(count)
            ]
            if not last and not compute_first:
                self._compute_unit()
        for h in handles:
            h.wait()
        self._join_side_stream()

    def calibrate(self, warmup: int, repeats: int | None = None, max_repeats: int = 4096) -> int:
        """Warm up, then repeat the collective so that it spans the compute alone.

        `repeats` fixes the count instead (V2 keeps the delay-free count at every delay).
        `max_repeats` bounds it: small collectives are launch-bound, and thousands of them
        would measure the host's launch rate; the overlap fraction shows what is left.
        Every rank takes the largest count any rank found, so all ranks issue the same
        collectives. Sets `t_compute_s`, the compute alone (fastest of three).
        """
        for phase in PHASES:
            for _ in range(max(1, warmup)):
                self.run_phase(phase)
        synchronize(self.device)
        self.comm_repeats = 1
        self.t_compute_s = min(
            timed(lambda: self.run_phase("nocomm"), self.device) for _ in range(3)
        )
        if repeats is not None:
            self.comm_repeats = repeats
            return repeats
        if self.spec.moves_no_data:
            return 1  # repeating a collective that does nothing only adds launches
        t_comm = min(timed(lambda: self.run_phase("comm_alone"), self.device) for _ in range(3))
        found = min(max_repeats, max(1, round(self.t_compute_s / max(t_comm, 1e-9))))
        count = torch.tensor([found], device=self.device)
        if dist.get_world_size() > 1:
            dist.all_reduce(count, op=dist.ReduceOp.MAX)
        self.comm_repeats = int(count.item())
        return self.comm_repeats

    def close(self) -> None:
        """Stop the CPU chain's thread and the co-located ranks' threads (the process
        group's communicators stay)."""
        if self._chain is not None:
            self._chain.shutdown()
        if self.coloc is not None:
            self.coloc.close()


class _FutureWork:
    """A work handle over a future of the CPU communication chain."""

    def __init__(self, future: Future):
        self.future = future

    def wait(self) -> bool:
        self.future.result()
        return True


class _ShapedAllReduce:
    """Rank 0's ring all-reduce of the buffer at `ranks` as one NCCL-shaped kernel (or, for
    `spin`, the same kernel holding its CTAs without moving a byte)."""

    def __init__(self, spec: MicrobenchSpec, buf: torch.Tensor):
        from artifact.workloads import nccl_shaped

        self.ns, w = nccl_shaped, spec.ranks
        self.chunk = buf.numel() // w
        ring = nccl_shaped.plan("all_reduce", w)
        self.buffers, self.steps = {}, []
        for r in range(spec.copies):  # rank 0's buffer first; the others' of their own
            own = buf[: self.chunk * w] if r == 0 else torch.randn_like(buf[: self.chunk * w])
            self.buffers |= {f"out{r}": own, f"fifo{r}": torch.empty_like(buf[: self.chunk])}
            self.steps += nccl_shaped.for_rank(ring, r)
        self.ctas, self.move = spec.ctas, spec.comm == "nccl-shaped"
        ring_bytes = 2 * (w - 1) * self.chunk * buf.element_size()
        self.duration_ns = (
            int(spec.pace_ms * 1e6)
            if spec.pace_ms
            else int(ring_bytes / (spec.link_gbps * 1e9) * 1e9)
            if spec.link_gbps
            else 0
        )
        self.counters = nccl_shaped.Counters(buf.device, self.ctas)

    def launch(self) -> None:
        self.ns.launch(
            self.buffers,
            self.steps,
            self.chunk,
            self.ctas,
            self.duration_ns,
            move_bytes=self.move,
            counters=self.counters,
        )


def _configured_group(ctas: int, cap: int, policy: str):
    """A communicator over every rank whose NCCL kernels use exactly `ctas` CTAs, or at
    most `cap`, or NCCL's CTA `policy` (artifact.rank.colocate.nccl_options)."""
    from artifact.rank.colocate import nccl_options

    opts = nccl_options(ctas or None, cap, policy)
    return dist.new_group(list(range(dist.get_world_size())), backend="nccl", pg_options=opts)


@contextlib.contextmanager
def sm_carveout(sms: int):
    """torch's matmuls leave `sms` SMs free inside the block (0: no change)."""
    if not sms:
        yield
        return
    before = torch._C._get_sm_carveout_experimental()
    torch._C._set_sm_carveout_experimental(sms)
    try:
        yield
    finally:
        torch._C._set_sm_carveout_experimental(before)
