"""`--emulate-world W` and `--link-gbps`: the values accepted, the link defaults and the
labels emulated records carry (artifact.run.emulation runs it; no torch here, so the CLI
checks the flags before torch loads)."""

from __future__ import annotations

import math
import re

from artifact.core.errors import ArtifactError

ACCEPTED = "an integer of 2 or more (the world size rank 0 stands in for)"
# The link's bandwidth in one direction, GB/s (1e9 bytes/s), by GPU model (matched on
# the name torch reports). Sources: NVIDIA's H100 and H200 datasheets (NVLink 4,
# 900 GB/s bidirectional: 450 each way), the A100 datasheet (NVLink 3, 600 GB/s: 300
# each way), the B200/DGX B200 datasheet (NVLink 5, 1.8 TB/s: 900 each way).
LINK_GBS: dict[str, float] = {"H100": 450.0, "H200": 450.0, "A100": 300.0, "B200": 900.0}
NOTE_PREFIX = "emulated:"
EMULATED_SUFFIX = re.compile(r"_e(\d+)$")  # what config_suffix appends to a config id
# the RunOptions fields of the figures that can run as rank 0 of W (the training figures)
EMULATION_OPTIONS = frozenset({"emulate_world", "link_gbps"})


def check_world(value, flag: str = "--emulate-world") -> int:
    """The `flag`'s value as an int, or one plain error naming it and what is accepted."""
    try:
        world = int(str(value), 10)
    except ValueError:
        world = 0
    if world < 2 or str(world) != str(value).strip():
        raise ArtifactError(f"{flag} {value!r} is not accepted; accepted: {ACCEPTED}")
    return world


def check_link(value) -> float:
    try:
        gbs = float(value)
    except (TypeError, ValueError):
        gbs = float("nan")
    if not (math.isfinite(gbs) and gbs > 0):
        raise ArtifactError(
            f"--link-gbps {value!r} is not accepted; accepted: a positive number of GB/s"
        )
    return gbs


def link_gbs(gpu_name: str | None, given: float | None) -> float:
    """The link bandwidth (GB/s, one direction) to pace copies to: `given`, or the GPU's default."""
    if given is not None:
        return given
    for model, gbs in LINK_GBS.items():
        if model in (gpu_name or ""):
            return gbs
    known = ", ".join(LINK_GBS)
    raise ArtifactError(
        f"no link bandwidth known for GPU {gpu_name!r} (known: {known}); pass --link-gbps"
    )


def check_alone(world: int, counts: dict[str, int | None]) -> None:
    """Emulation is one process on one device: a launch count (flag -> value given; None:
    left out) that asks for more is one plain error."""
    for flag, value in counts.items():
        if value is not None and value != 1:
            raise ArtifactError(
                f"--emulate-world {world} with {flag} {value}: emulation runs rank 0 alone "
                f"on one device; accepted: {flag} 1 or left out"
            )


def config_suffix(emulated: int | None) -> str:
    return f"_e{emulated}" if emulated else ""


def note(emulated: int) -> str:
    return (
        f"{NOTE_PREFIX} rank 0 of {emulated} ranks alone on one device (fake process "
        "group; collectives are paced local copies: no real link, no peers, no bubble)"
    )
