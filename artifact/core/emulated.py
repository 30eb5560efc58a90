"""`--emulate-world W` and `--link-gbps`: the values accepted, the link defaults and the
labels emulated records carry (artifact.rank.emulation runs it; no torch here, so the CLI
checks the flags before torch loads)."""

from __future__ import annotations

import json
import math
import re
from functools import cache
from importlib import resources

from artifact.core.errors import ArtifactError

ACCEPTED = "an integer of 2 or more (the world size rank 0 stands in for)"
# The link's bandwidth in one direction, GB/s (1e9 bytes/s), by GPU model (matched on
# the name torch reports). Sources: NVIDIA's H100 and H200 datasheets (NVLink 4,
# 900 GB/s bidirectional: 450 each way), the A100 datasheet (NVLink 3, 600 GB/s: 300
# each way), the B200/DGX B200 datasheet (NVLink 5, 1.8 TB/s: 900 each way).
LINK_GBS: dict[str, float] = {"H100": 450.0, "H200": 450.0, "A100": 300.0, "B200": 900.0}
NOTE_PREFIX = "emulated:"
# what config_suffix appends to a config id: _e4 (copy stand-in), _e4n (NCCL-shaped)
EMULATED_SUFFIX = re.compile(r"_e(\d+)(n?)$")
# the RunOptions fields of the figures that can run as rank 0 of W (the training figures)
EMULATION_OPTIONS = frozenset({"emulate_world", "link_gbps", "stand_in", "comm_ctas"})
# what moves rank 0's bytes (artifact.rank.emulation): paced copies, or one persistent
# kernel of C CTAs a collective, shaped as NCCL's ring (artifact.workloads.nccl_shaped)
STAND_INS = ("copy", "nccl-shaped")
DEFAULT_STAND_IN = "copy"  # until the NCCL-shaped one is validated at the W it emulates
NOT_VALIDATED = "stand-in not validated on this GPU"
VALIDATION_WORDS = {"holds": "validated", "fails": "not validated", "inconclusive": "inconclusive"}


def check_world(value, flag: str = "--emulate-world") -> int:
    """The `flag`'s value as an int, or one plain error naming it and what is accepted."""
    accepted = ACCEPTED if flag == "--emulate-world" else "an integer of 2 or more (ranks)"
    try:
        world = int(str(value), 10)
    except ValueError:
        world = 0
    if world < 2 or str(world) != str(value).strip():
        raise ArtifactError(f"{flag} {value!r} is not accepted; accepted: {accepted}")
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


def check_stand_in(value) -> str:
    if value not in STAND_INS:
        raise ArtifactError(
            f"--stand-in {value!r} is not accepted; accepted: {', '.join(STAND_INS)}"
        )
    return value


def check_ctas(value, flag: str = "--comm-ctas") -> int:
    """A CTA count: an integer from 1 to 1024 (no GPU has more SMs than that)."""
    try:
        ctas = int(str(value), 10)
    except ValueError:
        ctas = 0
    if not 1 <= ctas <= 1024 or str(ctas) != str(value).strip():
        raise ArtifactError(
            f"{flag} {value!r} is not accepted; accepted: an integer from 1 to 1024"
        )
    return ctas


@cache
def _channels() -> dict:
    text = resources.files("artifact.data").joinpath("nccl_channels.json").read_text()
    return json.loads(text)["models"]


@cache
def _validations() -> dict:
    text = resources.files("artifact.data").joinpath("standin_validation.json").read_text()
    return json.loads(text)["models"]


def validations(gpu_name: str | None) -> list[dict]:
    """The NCCL-shaped stand-in's measured validations on this GPU model (package data)."""
    for model, runs in _validations().items():
        if model in (gpu_name or ""):
            return [run | {"model": model} for run in runs]
    return []


def _points(run: dict) -> str:
    d, lo, hi = run["points"]
    return f"twin minus co-located NCCL {d:+.1f} points [{lo:+.1f}, {hi:+.1f}]"


def validation_text(gpu_name: str | None, world: int) -> str:
    """What the NCCL-shaped stand-in's validation says at `world` on this GPU model."""
    for run in validations(gpu_name):
        if run["world"] == world:
            label = "validated" if run["verdict"] == "holds" else "not validated"
            word = VALIDATION_WORDS[run["verdict"]]
            return f"stand-in {label} at W = {world} on {run['model']} ({word}: {_points(run)})"
    return f"{NOT_VALIDATED} at W = {world}"


def validation_sentence(gpu_name: str | None) -> str:
    """Every validation measured on this GPU model, as one sentence for the report."""
    runs = validations(gpu_name)
    if not runs:
        where = f"on {gpu_name}" if gpu_name else "here: no GPU ran"
        return f"The check has not been measured {where}."
    first = runs[0]
    return (
        f"On {first['model']} the check has read: "
        + "; ".join(
            f"{VALIDATION_WORDS[r['verdict']]} at W = {r['world']} ({_points(r)})" for r in runs
        )
        + f" (one {first['model']}, NCCL {first['nccl']}, commit {first['commit']}, "
        f"{first['date']}; package data artifact/data/standin_validation.json)."
    )


def ptx_refusal(gpu_name: str | None, what: str = "--stand-in nccl-shaped") -> str | None:
    """Why the NCCL-shaped kernel (and the SM-holding spin, its kernel) cannot run on this
    GPU, or None: it reads NVIDIA's %globaltimer through inline PTX, which AMD GPUs lack."""
    if "AMD" not in (gpu_name or ""):
        return None
    return (
        f"{what} runs a kernel that reads NVIDIA's %globaltimer (inline PTX): NVIDIA GPUs "
        f"only, and this GPU is {gpu_name!r}; accepted here: --stand-in copy"
    )


def nccl_channels(gpu_name: str | None, world: int) -> int | None:
    """NCCL's ring channels per rank on this GPU model at `world` (package data), or None."""
    for model, row in _channels().items():
        if model in (gpu_name or ""):
            return int(row.get("world", {}).get(str(world), row["default"]))
    return None


def comm_ctas(gpu_name: str | None, world: int, given: int | None) -> int:
    """The stand-in's CTAs: `given`, or NCCL's channel count for the GPU model."""
    if given is not None:
        return given
    found = nccl_channels(gpu_name, world)
    if found is None:
        known = ", ".join(_channels())
        raise ArtifactError(
            f"no NCCL channel count known for GPU {gpu_name!r} (known: {known}); pass --comm-ctas"
        )
    return found


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


def config_suffix(emulated: int | None, stand_in: str | None = None) -> str:
    if not emulated:
        return ""
    return f"_e{emulated}" + ("n" if stand_in == "nccl-shaped" else "")


def stand_in_of(config_id: str) -> str | None:
    """Which stand-in an emulated configuration id ran (None: not emulated)."""
    m = EMULATED_SUFFIX.search(str(config_id))
    return None if m is None else ("nccl-shaped" if m.group(2) else "copy")


# how each stand-in moves rank 0's bytes, as the report's first line says it
STAND_IN_TEXT = {
    "copy": "paced local copies",
    "nccl-shaped": "one persistent NCCL-shaped kernel a collective",
}


def note(
    emulated: int, stand_in: str | None = None, ctas: int | None = None, gpu: str | None = None
) -> str:
    shaped = stand_in == "nccl-shaped"
    how = (
        f"one persistent NCCL-shaped kernel of {ctas} CTAs a collective, paced to the link"
        if shaped
        else STAND_IN_TEXT["copy"]
    )
    checked = validation_text(gpu, emulated) if shaped else NOT_VALIDATED
    return (
        f"{NOTE_PREFIX} rank 0 of {emulated} ranks alone on one device (fake process "
        f"group; collectives are {how}: no real link, no peers, no bubble; {checked})"
    )
