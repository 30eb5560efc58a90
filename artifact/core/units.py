"""Units the artifact writes for people: one GiB constant, one byte and one duration
formatter (the plan, the report, preflight and the run's messages all use these)."""

from __future__ import annotations

KIB, MIB, GIB = 1 << 10, 1 << 20, 1 << 30


def size(n: float) -> str:
    """Bytes in binary units: 512 MiB, 1.5 GiB, 3.2 KiB ('64 MiB', never '65536KiB')."""
    for unit, k in (("GiB", GIB), ("MiB", MIB), ("KiB", KIB)):
        if n >= k:
            v = n / k
            return f"{v:.0f} {unit}" if v == int(v) else f"{v:.1f} {unit}"
    return f"{n:.0f} B"


def duration(s: float) -> str:
    """Seconds as people read them: 42 s, 5.5 min, 3.1 h."""
    if s < 120:
        return f"{s:.0f} s"
    if s < 2 * 3600:
        return f"{s / 60:.1f} min"
    return f"{s / 3600:.1f} h"
