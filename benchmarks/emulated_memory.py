"""Rank 0's peak device memory at world size W beside artifact.estimate.memory's estimate,
for every training configuration of a preset (issue 31: the estimate gates fit/not-fit).

Each configuration the run would measure (Figs. 4, 10 and 11; one row for a configuration
figures share), built by the experiments' own builders, runs `--steps` steps in overlap
mode as rank 0 of W under torch's fake process group, as `run --emulate-world W` does
(artifact/rank/emulation.py), in a process of its own: an out-of-memory error or a crash
ends that row only, and each peak is one configuration's. The peak is
torch.cuda.max_memory_allocated (and _reserved) over the steps after the first, the warm-up:
the run resets it after its warm-up too (artifact.rank.runner, `peak_memory_gib`).
Recorded, not run: a configuration that does not fit the device (memory.fits), the
pipeline (emulation refuses it) and a precision the device lacks.

The JSON is rewritten after each row, smallest estimate first, and a rerun keeps the rows
it holds (`--redo-failed`: all but the failed ones), so time-bounded calls add up. Prints
a line a row, then a markdown table of the rows more than 10 % off their estimate.

    python benchmarks/emulated_memory.py --preset paper --world 4 --out memory.json --seconds 540
    python benchmarks/emulated_memory.py --preset tiny --world 2 --out m.json  # CPU: no peaks
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# this checkout's artifact package, not another one an editable install may point to
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from artifact import env as envmod  # noqa: E402
from artifact.core.config import Preset, get_preset  # noqa: E402
from artifact.core.emulated import EMULATION_OPTIONS, check_world  # noqa: E402
from artifact.core.errors import ArtifactError, bad_choice  # noqa: E402
from artifact.core.units import GIB  # noqa: E402
from artifact.estimate import memory  # noqa: E402
from artifact.figures import all_figures, spec_of  # noqa: E402
from artifact.store import atomic_write_text, strict_json  # noqa: E402

# the figures that run training configurations under --emulate-world (fig5 reads fig4's)
FIGURES = tuple(
    f for f in all_figures() if spec_of(f).experiment and spec_of(f).options >= EMULATION_OPTIONS
)
OFF = 0.10  # a peak further than this from its estimate is listed (and the estimate corrected)
CPU_REASON = "no device memory counter on CPU"
PEAKS = ("peak_allocated_gib", "peak_reserved_gib")


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--preset", default="paper")
    p.add_argument("--world", default="4", help="W, the world size rank 0 stands in for")
    p.add_argument("--figures", default=",".join(FIGURES), help="default: %(default)s")
    p.add_argument("--steps", type=int, default=3, help="a configuration; the first a warm-up")
    p.add_argument("--out", type=Path, required=True, help="the table, JSON (resumed)")
    p.add_argument("--seconds", type=float, help="stop before this, finished rows kept")
    p.add_argument(
        "--config-seconds",
        type=float,
        default=300.0,
        help="a configuration still running after this is recorded failed (default 300)",
    )
    p.add_argument("--gpu-memory-gib", type=float, help="default: the device's")
    p.add_argument("--redo-failed", action="store_true", help="run the rows recorded failed again")
    p.add_argument("--child", help=argparse.SUPPRESS)  # a config id: measure it here
    p.add_argument("--result", type=Path, help=argparse.SUPPRESS)  # where the child writes
    return p.parse_args(argv)


def check(args: argparse.Namespace) -> tuple[Preset, int, list[str]]:
    """The preset, W and the figures, or one ArtifactError naming the bad value."""
    preset = get_preset(args.preset)
    world = check_world(args.world, "--world")
    figures = list(dict.fromkeys(f.strip() for f in args.figures.split(",")))
    for f in figures:
        if f not in FIGURES:
            raise bad_choice("figure", f, FIGURES)
    if args.steps < 2:
        raise ArtifactError(f"--steps must be at least 2 (a warm-up, then 1), got {args.steps}")
    for flag, v in (("--seconds", args.seconds), ("--gpu-memory-gib", args.gpu_memory_gib)):
        if v is not None and not v > 0:
            raise ArtifactError(f"{flag} must be a positive number, got {v:g}")
    return preset, world, figures


def device_of(preset: Preset):
    import torch

    if preset.device == "cpu":
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise ArtifactError(f"preset {preset.name!r} needs a GPU and none is here; on a CPU: tiny")
    return torch.device("cuda", 0)


def device_gib(device) -> float:
    """The device's memory: the GPU's total, or the host's RAM on a CPU."""
    import torch

    if device.type == "cuda":  # no tensor here: the children's peaks are their own
        return torch.cuda.get_device_properties(device).total_memory / GIB
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / GIB


def configurations(preset: Preset, world: int, figures: list[str], device) -> list:
    """(ConfigPoint, figures) for each configuration once, as `run --emulate-world W` builds
    it: the figures' sweeps (FigureSpec.configs, what the plan prices and the experiments
    walk) through the experiments' builders at world size W, which also decide
    recomputation as the run does."""
    from artifact.core.options import RunOptions
    from artifact.experiments import fsdp, pipeline
    from artifact.rank.runner import RunContext
    from artifact.store import RunStore

    # what the builders read; nothing is written to its store
    ctx = RunContext(
        figure="",
        preset=preset,
        device=device,
        rank=0,
        world_size=world,
        store=RunStore(Path(".")),
        provenance={},
        reps=1,
        warmup=1,
        iters=1,
        options=RunOptions(emulate_world=world),
    )
    points: dict[str, tuple] = {}
    for fig in figures:
        for p in spec_of(fig).configs(preset):
            builder = fsdp if p.parallelism == "fsdp" else pipeline
            point = builder.config_for(ctx, p.model, p.micro_batch, p.precision)
            points.setdefault(point.config_id, (point, []))[1].append(fig)
    return list(points.values())


def row_of(point, figures: list[str], world: int) -> dict:
    c = point.config
    keys = ("model", "parallelism", "precision", "micro_batch", "recompute", "seq_len")
    return {
        "config_id": point.config_id,
        "figures": figures,
        **{k: c[k] for k in keys},
        "world": world,
        # what the run gates on (artifact.experiments.training.cannot_run) and the plan shows
        "estimate_gib": memory.estimate(point.spec, world) / GIB,
        # measured on a GPU only: after the warm-up, and over the build and the warm-up
        **dict.fromkeys(PEAKS),
        **dict.fromkeys(("warmup_peak_allocated_gib", "warmup_peak_reserved_gib")),
    }


def not_run(point, row: dict, device, budget: float) -> dict | None:
    """The status of a configuration recorded without running it; None: run it."""
    from artifact.rank import capability

    if refused := point.config.get("emulation_refused"):
        return {"status": "refused", "reason": refused}
    if not memory.fits(row["estimate_gib"], budget):  # the run's rule (memory.fits)
        why = f"estimate {row['estimate_gib']:.1f} GiB + {memory.FIT_MARGIN:.0%} does not fit {budget:.1f} GiB"
        return {"status": "does not fit", "reason": why}
    if unsupported := capability.precision_unsupported(device, row["precision"]):
        return {"status": "refused", "reason": unsupported}
    return None


def measure(args: argparse.Namespace, config_id: str, timeout: float) -> dict | None:
    """Run one configuration in a child process; its outcome, or None where the time
    bound (not the configuration's own limit) stopped it: that row is left for a rerun."""
    if timeout <= 0:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        result = Path(tmp) / "result.json"
        argv = [
            sys.executable,
            str(Path(__file__).resolve()),
            "--child",
            config_id,
            "--result",
            str(result),
        ]
        for flag in ("preset", "world", "figures", "steps", "out"):
            argv += [f"--{flag}", str(getattr(args, flag))]
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            if timeout < args.config_seconds:
                return None
            return {"status": "failed", "reason": f"still running after {timeout:.0f} s"}
        if result.is_file():
            return json.loads(result.read_text())
        lines = [x for x in proc.stderr.splitlines() if x.strip()] or ["(no output)"]
        why = f"exit {proc.returncode}: {lines[-1].strip()[:300]}"
        return {"status": "failed", "reason": why, "log_tail": "\n".join(lines[-30:])}


def child(args: argparse.Namespace) -> int:
    """One configuration, in this process: rank 0 of W under the fake group, `--steps`
    overlap steps; the peaks written to --result."""
    from artifact import procs

    procs.die_with_parent()  # a parent stopped by the time bound takes this one along
    import torch

    from artifact.experiments import fsdp
    from artifact.rank import emulation
    from artifact.rank.modes import Mode

    # the environment torchrun gives the lone process of `run --emulate-world W`
    os.environ.update(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", LOCAL_WORLD_SIZE="1")
    preset, world, figures = check(args)
    device = device_of(preset)
    gpu = device.type == "cuda"
    if gpu:
        torch.cuda.set_device(device)
    emulation.join(world, device)
    points = {p.config_id: p for p, _ in configurations(preset, world, figures, device)}
    spec = points[args.child].spec

    def peaks(prefix: str = "") -> dict:
        if not gpu:
            return {f"{prefix}peak_allocated_gib": None, f"{prefix}peak_reserved_gib": None}
        torch.cuda.synchronize(device)
        return {
            f"{prefix}peak_allocated_gib": torch.cuda.max_memory_allocated(device) / GIB,
            f"{prefix}peak_reserved_gib": torch.cuda.max_memory_reserved(device) / GIB,
        }

    try:
        trainer = fsdp.make_trainer(spec, argparse.Namespace(device=device, rank=0))
        trainer.step(Mode.OVERLAP)  # the warm-up: allocations, and the emulated link's calibration
        warmup = peaks("warmup_")  # the build and the warm-up
        if gpu:
            torch.cuda.reset_peak_memory_stats(device)
        for _ in range(args.steps - 1):
            trainer.step(Mode.OVERLAP)
        out = {"status": "ran", "reason": "" if gpu else CPU_REASON, **peaks(), **warmup}
    except torch.OutOfMemoryError as e:
        first = (str(e).strip().splitlines() or [""])[0][:300]
        out = {"status": "oom", "reason": f"out of memory: {first}", **peaks()}
    atomic_write_text(args.result, json.dumps(strict_json(out)))
    # leave without C++ teardown, as the run's worker does (DeepSpeed has aborted at exit)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def load(path: Path, head: dict) -> dict:
    """The table so far, or a new one; a file from another preset, W or step count is an
    error (its rows would not be this table's)."""
    if not path.is_file():
        return {**head, "rows": []}
    doc = json.loads(path.read_text())
    theirs = {k: doc.get(k) for k in ("preset", "world", "steps")}
    if theirs != {k: head[k] for k in theirs}:
        raise ArtifactError(f"'{path}' holds another table ({theirs}); pass another --out")
    return doc


def line(row: dict) -> str:
    peak, ratio = row["peak_allocated_gib"], row["ratio"]
    measured = "no peak" if peak is None else f"peak {peak:.1f} GiB"
    measured += "" if ratio is None else f" (x{ratio:.2f})"
    why = f": {row['reason']}" if row["reason"] else ""
    return (
        f"{row['config_id']}: {row['status']}, estimate {row['estimate_gib']:.1f} GiB, "
        f"{measured}, {row['elapsed_s']:.0f} s{why}"
    )


def table(rows: list[dict]) -> str:
    """Markdown: the measured rows more than OFF from their estimate, and those that ran
    out of memory where the estimate said they fit (their peak: the last before it)."""
    measured = [r for r in rows if r["ratio"] is not None or r["status"] == "oom"]
    off = [r for r in measured if r["ratio"] is None or abs(r["ratio"] - 1) > OFF]
    if not measured:
        return "no peak measured yet: nothing to compare with the estimate"
    if not off:
        return f"every measured peak ({len(measured)}) within {OFF * 100:.0f} % of its estimate"
    out = [
        f"{len(off)} of {len(measured)} measured rows more than {OFF * 100:.0f} % off the estimate:",
        "",
        "| configuration | estimate GiB | peak allocated GiB | peak reserved GiB | peak / estimate |",
        "|---|---:|---:|---:|---:|",
    ]
    for r in off:
        gib = [f"{r[k]:.1f}" if r[k] is not None else "-" for k in PEAKS]
        ratio = "out of memory" if r["ratio"] is None else f"{r['ratio']:.2f}"
        out.append(f"| {r['config_id']} | {r['estimate_gib']:.1f} | {' | '.join(gib)} | {ratio} |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    start = time.monotonic()
    args = parse(argv)
    if args.child:
        return child(args)
    try:
        preset, world, figures = check(args)
        device = device_of(preset)
        budget = args.gpu_memory_gib or device_gib(device)
        head = {"preset": preset.name, "world": world, "steps": args.steps}
        doc = load(args.out, head)
    except ArtifactError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    # the latest run's (a resumed table's earlier rows came from earlier runs)
    doc |= {"provenance": envmod.capture(), "gpu_memory_gib": budget}
    if args.redo_failed:  # e.g. after a fix: the rest are kept
        doc["rows"] = [r for r in doc["rows"] if r["status"] != "failed"]
    deadline = start + args.seconds if args.seconds else float("inf")
    done = {r["config_id"] for r in doc["rows"]}
    todo = configurations(preset, world, figures, device)
    todo.sort(key=lambda pf: memory.estimate(pf[0].spec, world))  # most rows in a short call
    for point, figs in todo:
        if point.config_id in done:
            print(f"{point.config_id}: kept from '{args.out}'")
            continue
        row, began = row_of(point, figs, world), time.monotonic()
        outcome = not_run(point, row, device, budget)
        if outcome is None:
            left = deadline - began
            outcome = measure(args, point.config_id, min(left, args.config_seconds))
            if outcome is None:
                print(f"stopped: --seconds {args.seconds:g} reached; a rerun goes on from here")
                break
        row |= outcome
        ran = row["status"] == "ran" and row["peak_allocated_gib"] is not None
        row["ratio"] = row["peak_allocated_gib"] / row["estimate_gib"] if ran else None
        row["elapsed_s"] = time.monotonic() - began
        doc["rows"].append(row)
        atomic_write_text(args.out, json.dumps(strict_json(doc), indent=1) + "\n")
        print(line(row), flush=True)
    print(table(doc["rows"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
