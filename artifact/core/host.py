"""The host's memory, read without torch (the plan imports no torch)."""

from __future__ import annotations

import os


def available_bytes() -> int | None:
    """MemAvailable of /proc/meminfo: what new processes can use without swapping; None
    where there is no /proc/meminfo (not Linux)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def share_bytes(processes: int) -> float | None:
    """The available memory each of `processes` processes on this host may use (the CPU
    preset's ranks share one host): the plan and the run's check use the same rule."""
    free = available_bytes()
    return None if free is None else free / max(1, processes)


def local_processes() -> int:
    """The ranks on this host (torchrun's LOCAL_WORLD_SIZE; 1 outside torchrun)."""
    return int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
