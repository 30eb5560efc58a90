"""Execution modes (DESIGN.md section 3): same model, same data, same kernel list.

- overlap:    collectives are issued asynchronously and waited for when their result
              is needed, so compute runs beside them (the frameworks' default).
- sequential: every collective is waited for right after it is issued, and the device
              is drained before and after it, so no compute kernel can run beside a
              communication kernel (the trace's overlap fraction must be ~0).
- nocomm:     collectives become no-ops on buffers of the same shape; numerics are
              meaningless, the mode exists to validate the sequential baseline (V1).

Workloads route every collective through `issue`, so a mode is one switch, not a
copy of the workload.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum

import torch

from artifact.errors import bad_choice
from artifact.measure.timing import synchronize


class Mode(StrEnum):
    OVERLAP = "overlap"
    SEQUENTIAL = "sequential"
    NOCOMM = "nocomm"


def parse_mode(name: str) -> Mode:
    try:
        return Mode(name)
    except ValueError:
        raise bad_choice("mode", name, [m.value for m in Mode]) from None


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
