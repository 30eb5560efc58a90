"""The facts of the report's first screen (dates, hardware, the stack against its pins,
what ran, disk use), drawn from the results folder as artifact.results reads it."""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import TypeVar

from artifact.env import FINGERPRINT_KEYS, REPO_ROOT
from artifact.figures import REGISTRY
from artifact.judge.figure_status import figure_status
from artifact.results import Results

TITLE = "Artifact appendix: Characterizing Compute-Communication Overlap in GPU-Accelerated Distributed Deep Learning (Lee et al., arXiv 2507.03114)"
# what makes an environment (the mixing check's keys), and how the run used it
PROVENANCE_KEYS = (*FINGERPRINT_KEYS, "python", "preset", "world_size", "nnodes", "power_backend")
# provenance key -> the distribution pyproject.toml pins it as
PINNED = {
    "torch": "torch",
    "deepspeed": "deepspeed",
    "megatron_core": "megatron-core",
    "nvidia_ml_py": "nvidia-ml-py",
}


def not_run(fig: str, run: Results) -> str | None:
    """Why `fig` has nothing to show ('failed: ...', 'not run: ...'), or None if it ran."""
    category, detail = figure_status(fig, run.status, run.summary)
    return None if category.startswith("ran") else f"{category}: {detail}"


Entry = TypeVar("Entry")


def declared(run: Results, table: Mapping[str, Entry]) -> list[tuple[str, Entry, str | None]]:
    """(figure, `table`'s entry, why the figure has nothing to show or None) for each report
    section a spec declares (FigureSpec.report_sections) whose kind `table` knows, figure
    by figure in the registry's order, each in its spec's order."""
    return [
        (fig, table[kind], not_run(fig, run))
        for fig, spec in REGISTRY.items()
        for kind in spec.report_sections
        if kind in table
    ]


def as_value(x) -> str:
    return "-" if x in (None, "") else str(x)


def run_dates(run: Results) -> tuple[str, str]:
    """First and last record timestamps, as 'YYYY-MM-DD HH:MM' (UTC)."""
    stamps = run.ran_on.get("timestamps") or ["-"]
    short = [s[:16].replace("T", " ") for s in (stamps[0], stamps[-1])]
    return short[0], short[1]


def worlds(configs: dict) -> tuple[list[int], list[int]]:
    """The world sizes the configurations ran at, and those they emulated (--emulate-world:
    rank 0 of W alone); an empty folder reads world size 1."""
    real = sorted({int(c.get("world_size", 1)) for c in configs.values() if not c.get("emulated_world")})  # fmt: skip
    emulated = sorted({int(c["emulated_world"]) for c in configs.values() if c.get("emulated_world")})  # fmt: skip
    return real or ([] if emulated else [1]), emulated


def world_text(configs: dict, gloo: bool = False) -> str:
    """'world size 1', or with --emulate-world 'emulated world size 4 (rank 0 of 4 run
    alone)' (both where the folder holds both); `gloo`: '2 gloo processes'."""
    real, emulated = worlds(configs)
    sizes, shown = ", ".join(map(str, real)), ", ".join(map(str, emulated))
    parts = [f"{sizes} gloo processes" if gloo else f"world size {sizes}"] if real else []
    parts += [f"emulated world size {shown} (rank 0 of {shown} run alone)"] if emulated else []
    return "; ".join(parts)


def collectives_library(prov: dict) -> str:
    """`NCCL 2.28.9`, `RCCL ...` on ROCm, or what ran instead (gloo on a CPU)."""
    name = "RCCL" if prov.get("rocm") else "NCCL"
    if prov.get("nccl"):
        return f"{name} {prov['nccl']}"
    return f"no {name} (collectives over {prov['backend']})" if prov.get("backend") else f"{name} -"


def hardware_line(prov: dict, configs: dict) -> str:
    """'1 x NVIDIA H200 (driver ..., CUDA ...); world size 1' or the CPU's processes."""
    if not prov.get("gpu_count"):
        cpu = f"{as_value(prov.get('cpu_model'))}, {as_value(prov.get('cpu_count'))} cores"
        return f"CPU only ({cpu}): {world_text(configs, gloo=True)}"
    runtime = f"CUDA {prov['cuda']}" if prov.get("cuda") else f"ROCm {as_value(prov.get('rocm'))}"
    nodes = prov.get("nnodes") or 1
    state = prov.get("gpu_state") or {}
    limit = f", power limit {state['power_limit_w']:g} W" if state.get("power_limit_w") else ""
    uuid = f", {state['uuid']}" if state.get("uuid") else ""
    return (
        f"{prov['gpu_count']} x {prov.get('gpu_model')} (driver {as_value(prov.get('driver'))}, "
        f"{runtime}{limit}{uuid}){f', {nodes} nodes' if nodes > 1 else ''}; {world_text(configs)}"
    )


def pins(root: Path = REPO_ROOT) -> dict[str, str]:
    """Distribution -> the version pyproject.toml pins (empty where it is not found)."""
    path = root / "pyproject.toml"
    if not path.is_file():
        return {}
    deps = tomllib.loads(path.read_text())["project"]["dependencies"]
    return dict(d.split("==", 1) for d in deps if "==" in d)


def stack_deviations(seen: dict[str, list[str]], pinned: dict[str, str] | None = None) -> list[str]:
    """'torch 2.11.0+cu130 (pinned 2.13.0)' for every version the records ran with
    (`seen`: provenance.json's values) that is not the pinned one; a local build tag
    (+cu130, +cpu) is not a deviation."""
    pinned = pins() if pinned is None else pinned
    out = []
    for key, dist in PINNED.items():
        want = pinned.get(dist)
        for version in seen.get(key, []):
            if want and re.split(r"\+", version)[0] != want:
                out.append(f"{dist} {version} (pinned {want})")
    return out


def folder_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.is_dir() else 0
