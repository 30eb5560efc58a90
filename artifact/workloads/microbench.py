"""Fig. 8's microbenchmark: square matmuls beside a large all-reduce, on one rank.

Phases of one iteration (all ranks run the same phase at the same time):
    nocomm      the matmuls alone (compute in isolation)
    comm_alone  the collectives alone
    sequential  the collectives, each drained, then the matmuls (artifact.modes)
    overlap     the collectives on their stream while the matmuls run on theirs

The collective (`comm`):
    allreduce    a SUM all-reduce. On one GPU it moves no data and launches no kernel.
    onerank-avg  an AVG all-reduce. On one GPU NCCL runs its one-rank reduction kernel,
                 which reads and writes the whole buffer on SMs: a proxy that contends
                 for SMs and memory bandwidth as NCCL's kernels do.
    copy         a device-to-device copy of the same size on a side stream. The copy
                 engine moves the bytes: a proxy that contends for bandwidth, not SMs.
Results from either proxy are labelled so.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.distributed as dist

from artifact.measure.timing import synchronize, timed
from artifact.modes import Mode, issue
from artifact.precision import dtype_of, matmul_precision

PHASES = ("nocomm", "comm_alone", "sequential", "overlap")
COMMS = ("allreduce", "onerank-avg", "copy")


def phase_order(rep: int) -> tuple[str, ...]:
    """PHASES rotated by rep, so no phase always runs first (or always after overlap).

    On an H200 at its 700 W limit, matmuls right after a busy phase ran ~10 % slower than
    the same matmuls later on: a fixed order would bias whichever phase comes first.
    """
    k = rep % len(PHASES)
    return PHASES[k:] + PHASES[:k]


@dataclass(frozen=True)
class MicrobenchSpec:
    matmul_size: int
    precision: str
    comm_bytes: int
    matmuls_per_iter: int
    comm: str  # one of COMMS

    @property
    def moves_no_data(self) -> bool:
        return self.comm == "allreduce" and dist.get_world_size() == 1

    @property
    def matmul_flops(self) -> int:
        return 2 * self.matmul_size**3


class Microbench:
    """Buffers and the four phases; `comm_repeats` is set by `calibrate`."""

    def __init__(self, spec: MicrobenchSpec, device: torch.device, seed: int = 0):
        if spec.comm not in COMMS:
            raise ValueError(f"unknown collective {spec.comm!r}; accepted: {', '.join(COMMS)}")
        if spec.comm == "copy" and device.type != "cuda":
            raise ValueError("the copy proxy needs a GPU (it stands in for a one-GPU all-reduce)")
        self.spec, self.device = spec, device
        gen = torch.Generator(device=device).manual_seed(seed)
        n, dt = spec.matmul_size, dtype_of(spec.precision)
        self.a = torch.randn(n, n, device=device, dtype=dt, generator=gen)
        self.b = torch.randn(n, n, device=device, dtype=dt, generator=gen)
        self.c = torch.empty(n, n, device=device, dtype=dt)
        numel = spec.comm_bytes // 4
        self.comm_buf = torch.randn(numel, device=device, generator=gen)
        self.copy_dst = torch.empty_like(self.comm_buf) if spec.comm == "copy" else None
        self.side_stream = torch.cuda.Stream(device) if spec.comm == "copy" else None
        self.comm_repeats = 1

    def _launch_comm(self):
        if self.spec.comm == "copy":
            with torch.cuda.stream(self.side_stream):
                self.copy_dst.copy_(self.comm_buf)
            return None
        op = dist.ReduceOp.AVG if self.spec.comm == "onerank-avg" else dist.ReduceOp.SUM
        return dist.all_reduce(self.comm_buf, op=op, async_op=True)

    def _matmuls(self) -> None:
        with matmul_precision(self.spec.precision):
            for _ in range(self.spec.matmuls_per_iter):
                torch.mm(self.a, self.b, out=self.c)

    def _join_side_stream(self) -> None:
        if self.side_stream is not None:
            torch.cuda.current_stream(self.device).wait_stream(self.side_stream)

    def run_phase(self, phase: str) -> None:
        # comm_alone issues the collectives as overlap does, with no matmuls beside them;
        # nocomm issues none (artifact.modes makes them no-ops).
        mode = {"comm_alone": Mode.OVERLAP, "nocomm": Mode.NOCOMM}.get(phase) or Mode(phase)
        handles = [issue(mode, self._launch_comm, self.device) for _ in range(self.comm_repeats)]
        if phase != "comm_alone":
            self._matmuls()
        for h in handles:
            h.wait()
        self._join_side_stream()

    def calibrate(self, warmup: int) -> int:
        """Warm up, then repeat the collective so that it spans the matmuls alone.

        Every rank takes the largest count any rank found, so all ranks issue the same
        collectives.
        """
        for phase in PHASES:
            for _ in range(max(1, warmup)):
                self.run_phase(phase)
        synchronize(self.device)
        self.comm_repeats = 1
        if self.spec.moves_no_data:
            return 1  # repeating a collective that does nothing only adds launches
        t_compute = min(timed(lambda: self.run_phase("nocomm"), self.device) for _ in range(3))
        t_comm = min(timed(lambda: self.run_phase("comm_alone"), self.device) for _ in range(3))
        repeats = torch.tensor([max(1, round(t_compute / max(t_comm, 1e-9)))], device=self.device)
        if dist.get_world_size() > 1:
            dist.all_reduce(repeats, op=dist.ReduceOp.MAX)
        self.comm_repeats = int(repeats.item())
        return self.comm_repeats
