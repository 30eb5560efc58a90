"""How many CTAs of one kernel an SM holds, alone or beside one CTA of another: CUDA's
occupancy rules applied to the footprints the profiler recorded (artifact.measure.kernels).

A GEMM whose CTAs fit on an SM beside a collective's CTA shares that SM; one whose CTA does
not fit waits for the SM, and a persistent GEMM (one CTA an SM, one wave) then runs a
second wave: wave quantization. The contention map's holders (SMs held, the NCCL-shaped
stand-in) stand for NCCL only where they leave the GEMM the same room NCCL's CTA leaves.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

REG_UNIT = 256  # registers are allocated a warp at a time, in units of 256 (sm_50 and later)
SMEM_RESERVED = 1024  # bytes the driver reserves a CTA on sm_80 and later


@dataclass(frozen=True)
class Footprint:
    """One kernel's CTA: threads, registers a thread, shared memory (bytes)."""

    threads: int
    regs: int
    smem: int

    def registers(self) -> int:
        per_warp = math.ceil(self.regs * 32 / REG_UNIT) * REG_UNIT
        return math.ceil(self.threads / 32) * per_warp

    def shared(self) -> int:
        return self.smem + SMEM_RESERVED


@dataclass(frozen=True)
class Sm:
    """One SM's limits (the trace's deviceProperties)."""

    registers: int
    shared: int
    threads: int


def ctas_fit(sm: Sm, guest: Footprint, beside: Footprint | None = None) -> int:
    """CTAs of `guest` one SM holds, with one CTA of `beside` already on it (None: alone)."""
    regs, smem, threads = sm.registers, sm.shared, sm.threads
    if beside is not None:
        regs -= beside.registers()
        smem -= beside.shared()
        threads -= beside.threads
    if min(regs, smem, threads) < 0:
        return 0
    return min(regs // guest.registers(), smem // guest.shared(), threads // guest.threads)
