"""The host's memory, read without torch (the plan imports no torch)."""

from __future__ import annotations


def available_bytes() -> int:
    """MemAvailable of /proc/meminfo: what new processes can use without swapping."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 1 << 62  # no /proc/meminfo: nothing to compare against
