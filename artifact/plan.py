"""`artifact plan`: what a run will do before it starts (no torch: instant).

Argument parsing, the typed query (PlanQuery) and rendering only: the cost model is artifact/estimate/model.py and
its calibration data artifact/data/reference.json (artifact/estimate/reference.py)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import re
from dataclasses import dataclass, fields
from pathlib import Path

from artifact import procs
from artifact.command import invocation
from artifact.core import host
from artifact.core.config import PRESETS, Preset, default_preset, get_preset
from artifact.core.emulated import EMULATION_OPTIONS, check_alone, check_world
from artifact.core.errors import ArtifactError
from artifact.core.options import RunOptions
from artifact.core.units import GIB, duration, size
from artifact.estimate import adaptive, items, model, reference
from artifact.estimate.model import Row, build, figures_of, totals
from artifact.figures import all_figures, spec_of
from artifact.judge.expected import EXPECTED_DIR, ExpectedItem, load_expected
from artifact.judge.figure_status import CPU_REASON, on_a_cpu

__all__ = [
    "PlanQuery",
    "Row",
    "add_arguments",
    "build",
    "figures_of",
    "main",
    "parse",
    "plan",
    "render",
    "run",
    "show",
    "totals",
]


@dataclass(frozen=True)
class PlanQuery:
    """What a plan is drawn for: `plan`'s flags less how it is printed (FIGs: none, all)."""

    figures: tuple[str, ...] = ()
    preset: str | None = None  # None: quick with a GPU, tiny without
    gpus: int | None = None  # None: this machine's
    ranks_per_gpu: int | None = None
    nproc: int | None = None  # the rehearsal's gloo processes on a CPU
    gpu_memory_gib: float | None = None
    emulate_world: str | int | None = None  # as given: check_world reads and checks it
    adaptive: bool = False

    @classmethod
    def of(cls, args: argparse.Namespace) -> PlanQuery:
        """The query of parsed flags: `plan`'s, or `run`'s (which `all` hands on): each
        field the namespace holds (run has no FIGs and no --gpu-memory-gib)."""
        given = {f.name: getattr(args, f.name) for f in fields(cls) if hasattr(args, f.name)}
        return cls(**{**given, "figures": tuple(given.get("figures") or ())})


def visible_gpus() -> int:
    """GPUs this machine shows, without torch: CUDA_VISIBLE_DEVICES, else /dev/nvidiaN (0: none)."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        return len([d for d in env.split(",") if d.strip() and d.strip() != "-1"])
    dev = Path("/dev")
    return sum(1 for f in dev.glob("nvidia*") if re.fullmatch(r"nvidia\d+", f.name))


def memory_gib(preset: Preset, gpus: int, given: float | None) -> tuple[float, str]:
    """The memory per GPU (CPU preset: per process), and where it comes from:
    --gpu-memory-gib, else 80 GiB per GPU, or this host's available memory shared by the
    preset's processes (the run checks the same share; infinite where it is unknown)."""
    if given is not None:
        return given, "--gpu-memory-gib"
    if preset.device != "cpu":
        return 80.0, "the default"
    share = host.share_bytes(gpus)
    if share is None:
        return math.inf, "no /proc/meminfo here: not checked"
    return share / GIB, "this host's available memory shared"


def _per(preset: Preset) -> str:
    return "process" if preset.device == "cpu" else "GPU"


def _gib_per(preset: Preset, gib: float) -> str:
    """'80 GiB per GPU'; a host's share, measured, to a tenth: '10.8 GiB per process'."""
    return f"{gib:.1f} GiB per process" if preset.device == "cpu" else f"{gib:g} GiB per GPU"


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument(
        "figures", nargs="*", metavar="FIG", help=f"{', '.join(all_figures())} (default: all)"
    )
    ap.add_argument(
        "--preset",
        help="tiny (CPU), quick, review or paper; default: quick with a GPU, tiny without",
    )
    ap.add_argument(
        "--gpus", type=int, help="GPUs (FSDP world size, pipeline stages); default: this machine's"
    )
    ap.add_argument(
        "--ranks-per-gpu",
        type=int,
        help="K ranks share each GPU (`run --ranks-per-gpu K`): the world is GPUs x K, and a "
        "configuration fits where K ranks' memory does",
    )
    ap.add_argument("--nproc", type=int, help="gloo processes on a CPU (the rehearsal's world)")
    ap.add_argument(
        "--gpu-memory-gib",
        type=float,
        help="memory per GPU (default 80; with tiny: this host's available memory per process)",
    )
    ap.add_argument(
        "--emulate-world",
        help="price `run --emulate-world W`: the training figures as rank 0 of W on one GPU",
    )
    ap.add_argument(
        "--adaptive",
        action="store_true",
        help="price repetitions by the stopping rule, as `run --adaptive` runs it",
    )
    ap.add_argument("--json", action="store_true", help="rows and totals as JSON")
    ap.add_argument("--summary", action="store_true", help="per-figure totals only")


def plan(args: PlanQuery) -> tuple[Preset, int, list[Row], tuple[float, str]]:
    """Check the query (ArtifactError naming the bad value) and build the rows:
    (preset, GPUs or processes, rows, memory_gib's (GiB, source))."""
    figures = figures_of(args.figures)
    found = visible_gpus()
    preset = get_preset(args.preset or default_preset(found > 0))
    for flag in ("gpus", "ranks_per_gpu", "nproc"):
        if (value := getattr(args, flag)) is not None and value < 1:
            raise ArtifactError(f"--{flag.replace('_', '-')} must be at least 1, got {value}")
    per_gpu = args.ranks_per_gpu or 1
    if args.gpu_memory_gib is not None and not 0 < args.gpu_memory_gib < math.inf:
        raise ArtifactError(
            f"--gpu-memory-gib must be a positive number, got {args.gpu_memory_gib:g}"
        )
    if preset.device == "cpu":
        if args.gpus not in (None, preset.cpu_processes):
            raise ArtifactError(
                f"preset 'tiny' runs {preset.cpu_processes} CPU processes, --gpus {args.gpus} "
                f"does not apply; accepted presets for GPUs: "
                + ", ".join(n for n, q in PRESETS.items() if q.device == "gpu" and not q.rehearsal)
            )
        gpus = preset.cpu_processes
    elif nproc := args.nproc:  # the rehearsal's gloo processes
        gpus = nproc
    else:
        gpus = args.gpus or max(1, found)
    if args.emulate_world is not None:
        world = check_world(args.emulate_world)
        check_alone(world, {"--gpus": args.gpus})
        memory = memory_gib(preset, 1, args.gpu_memory_gib)
        return preset, 1, _with_items(emulated_plan(preset, figures, world, memory[0])), memory
    memory = memory_gib(preset, gpus, args.gpu_memory_gib)
    gib = memory[0]
    rows = _with_items(build(preset, figures, gpus, gib, per_gpu=per_gpu))
    if args.adaptive:
        if preset.device == "cpu":
            raise ArtifactError(
                "--adaptive prices GPU presets; accepted: "
                + ", ".join(n for n, q in PRESETS.items() if q.device == "gpu" and not q.rehearsal)
            )
        paper = _paper_items()
        if paper is None:
            raise ArtifactError(
                f"--adaptive needs the paper's tolerances in '{EXPECTED_DIR}', which is not "
                "there; run the plan from the checkout"
            )
        again = lambda p: build(p, figures, gpus, gib, per_gpu=per_gpu)  # noqa: E731
        rows = adaptive.apply(preset, rows, again, paper)
    return preset, gpus * per_gpu, rows, memory


def _paper_items() -> list[ExpectedItem] | None:
    """expected/'s items, or None where there is no expected/ (a wheel installed outside
    the checkout carries none: the plan then prices without them)."""
    return load_expected() if EXPECTED_DIR.is_dir() else None


def _with_items(rows: list[Row]) -> list[Row]:
    """Each row's `feeds`: the paper's items (expected/*.yaml) it is one of the rows of."""
    paper = _paper_items()
    for r, fed in zip(rows, items.fed_items(rows, paper or []), strict=True):
        r.feeds = fed
    return rows


def figure_category(rows: list[Row], figure: str) -> tuple[str, str]:
    """figure_status's (category, detail) as this plan foresees it: 'ran' where one of the
    figure's configurations runs (fig5: fig4's), 'ran partly' where it has configurations
    but the device runs none, else 'not run' with the plan's reason (fig9 without
    --allow-power-cap, fig6 without telemetry, a figure this plan leaves out)."""
    src = spec_of(figure).records
    mine = [r for r in rows if r.figure == src]
    if any(r.runs for r in mine):
        return "ran", ""
    if any(r.fits is not None for r in mine):
        return "ran partly", "the device runs none of its configurations"
    notes = [r.note.removeprefix("not run: ") for r in mine if r.note]
    return "not run", notes[0] if notes else "not in this plan"


def item_states(
    rows: list[Row], paper: list[dict], device: str, emulated: bool
) -> dict[str, tuple[str, str]]:
    """Each paper item's (state, why) as the report will give it, for those the plan can
    tell: 'not run', 'not applicable', or 'judged' (its verdict waits for the numbers).
    On a CPU it is compare's own function (figure_status.on_a_cpu) on this plan's figures;
    on GPUs the GPU's name is not known here, so an item scoped to other GPUs shows as
    judged (compare then says "not applicable")."""
    if device == "cpu":
        return {i.id: on_a_cpu(i, lambda f: figure_category(rows, f)) for i in paper}
    left = items.unjudged(rows, paper)
    here = items.not_applicable_here(rows, paper, device, emulated)
    return {
        i.id: ("not run", left[i.id])
        if i.id in left
        else ("not applicable", here[i.id])
        if i.id in here
        else ("judged", "")
        for i in paper
    }


def _cpu_items_section(paper: list[dict], rows: list[Row]) -> list[str]:
    """On a CPU: the items whose figures do not run ("not run", what a reviewer would
    rerun), and the rest, "not applicable": compare's verdicts on such a run."""
    states = item_states(rows, paper, "cpu", False)
    not_run = {i: why for i, (state, why) in states.items() if state == "not run"}
    lines = [f"paper items not run ({len(not_run)})" + (":" if not_run else "")]
    lines += [f"  {item}: {why}" for item, why in not_run.items()]
    lines.append(
        f"not applicable: the other {len(states) - len(not_run)} ({CPU_REASON.rstrip('.')})"
    )
    return lines + [""]


def _items_section(rows: list[Row], summary: bool, preset: Preset, emulated: bool) -> list[str]:
    """Which paper items each configuration feeds (not with --summary), which the plan
    leaves unjudged, with why, and which of the rest this hardware cannot judge."""
    lines = []
    if not summary:
        lines.append("paper items (expected/*.yaml) each configuration feeds:")
        for r in rows:
            if r.feeds:
                mb = "" if r.micro_batch is None else f" mb {r.micro_batch}"
                what = f"{r.figure} {r.model} {r.parallelism} {r.precision}{mb}"
                lines.append(f"  {what}: {', '.join(r.feeds)}")
    paper = _paper_items()
    if paper is None:
        return lines + [f"paper items: not listed ('{EXPECTED_DIR}' is not here)", ""]
    if preset.device == "cpu":
        return lines + _cpu_items_section(paper, rows)
    left = items.unjudged(rows, paper)
    lines.append(f"paper items left unjudged ({len(left)})" + (":" if left else ""))
    lines += [f"  {item}: {why}" for item, why in left.items()]
    here = items.not_applicable_here(rows, paper, preset.device, emulated)
    judgeable, reasons = len(paper) - len(left), set(here.values())
    if here and len(here) == judgeable and len(reasons) == 1:
        lines.append(f"judged here: none of the other {judgeable} ({reasons.pop()})")
    elif here:
        lines.append(f"of the other {judgeable}, not judged here ({len(here)}):")
        for why in dict.fromkeys(here.values()):
            ids = [item for item, w in here.items() if w == why]
            lines.append(f"  {why} ({len(ids)}): {', '.join(ids)}")
    return lines + [""]


def emulated_plan(preset: Preset, figures: list[str], world: int, gib: float) -> list[Row]:
    """The plan of `run --emulate-world W` on one device: the figures that take it priced
    as rank 0 of `world` (its shard's memory, its step: per-rank compute does not change
    with W; one rank's traces), the pipeline refused (as the run records it), and the
    other figures as a one-device run (`all` hands them no --emulate-world)."""
    takes = [f for f in figures if spec_of(f).options >= EMULATION_OPTIONS]
    # together (fig10 reuses fig4's row), with the ids the run gives them ('_e4')
    emulating = build(preset, takes, world, gib, RunOptions(emulate_world=world))
    for r in emulating:
        r.traces_bytes //= world  # rank 0's traces alone
        if r.parallelism == "pipeline":
            r.runs, r.time_s, r.records_bytes, r.traces_bytes = False, 0.0, 0, 0
            r.note = "not run: the pipeline is not emulated"
        elif r.fits is not None:
            link = "" if preset.device == "cpu" else "; link time not priced"
            r.note = "; ".join(x for x in (f"emulated rank 0 of {world}{link}", r.note) if x)
    others = build(preset, [f for f in figures if f not in takes], 1, gib)
    rows = sorted(emulating + others, key=lambda r: figures.index(r.figure))  # stable
    return rows


def _table(rows: list[Row], preset: Preset) -> list[str]:
    head = ("figure", "model", "parallelism", "prec", "mb", f"GiB/{_per(preset)}", "fits", "time", "method", "disk", "note")  # fmt: skip
    table = [head]
    for r in rows:
        mem = "-" if r.memory_gib is None else f"{r.memory_gib:.1f}"
        if r.memory_method == "buffers":
            mem += " (buf)"
        fits = {True: "yes", False: "NO", None: "-"}[r.fits]
        took = duration(r.time_s_if_run)
        table.append(
            (r.figure, r.model, r.parallelism, r.precision,
             "-" if r.micro_batch is None else str(r.micro_batch), mem, fits,
             took if r.runs is not False else f"({took})", r.method,
             size(r.records_bytes + r.traces_bytes), r.note)
        )  # fmt: skip
    widths = [max(len(t[i]) for t in table) for i in range(len(head) - 1)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(t, widths, strict=False)) + "  " + t[-1] for t in table]  # fmt: skip
    lines += [
        "",
        "memory: artifact.estimate.memory's estimate (training; against peaks measured on an "
        "H200: ZeRO-3's 1-2 % above them at world size 1 and up to 5 % below them as rank 0 "
        "of 4, the pipeline's 13 % above its one peak) or (buf) the microbenchmark's buffers "
        "+ 1 GiB runtime",
        *(f"time [{m}]: {model.method_text(m)}" for m in dict.fromkeys(r.method for r in rows)),
        "disk: " + model.disk_text(),
        *([f"repetitions: {adaptive.method_text(preset)}"] if _adaptive(rows) else []),
        "",
    ]
    return lines


def _adaptive(rows: list[Row]) -> bool:
    return any("by the stopping rule" in r.note for r in rows)


def _configurations(n: int) -> str:
    return "configuration" if n == 1 else "configurations"


def render(
    preset: Preset,
    gpus: int,
    memory: tuple[float, str],
    rows: list[Row],
    summary: bool,
    emulated: bool = False,
) -> str:
    """The plan as text; `memory` is memory_gib's (GiB per GPU or process, its source)."""
    unit = "CPU processes" if preset.device == "cpu" else "GPU(s)"
    gib, source = memory
    whose = f" ({source})" if preset.device == "cpu" else ""
    lines = [f"plan: preset {preset.name}, {gpus} {unit}, {_gib_per(preset, gib)}{whose}"]
    if not summary:
        lines += _table(rows, preset)
    lines += _items_section(rows, summary, preset, emulated)
    by_fig: dict[str, list[Row]] = {}
    for r in rows:
        by_fig.setdefault(r.figure, []).append(r)
    for fig, rs in by_fig.items():
        t = totals(rs)
        skip = f", {t['not_run']} not run" if t["not_run"] else ""
        lines.append(
            f"{fig:<11}{t['configurations']:>4} {_configurations(t['configurations']):<14}"
            f"{skip:<18} {duration(t['time_s']):>9}"
            f"  disk {size(t['disk_bytes'])}"
        )
    t = totals(rows)
    lines.append(
        f"total: {t['configurations']} configurations, {t['fit']} fit {_gib_per(preset, gib)}, "
        f"{t['not_run']} recorded 'not run'; {duration(t['time_s'])} "
        f"({duration(t['time_s_if_all_ran'])} if all ran); disk {size(t['disk_bytes'])} "
        f"(records {size(t['records_bytes'])}, traces {size(t['traces_bytes'])})"
    )
    zero3_on_cpu = preset.device == "cpu" and any(r.runs and r.parallelism == "fsdp" for r in rows)
    if zero3_on_cpu and not procs.built("deepspeed_shm_comm"):
        lines.append(
            "first use on this machine: DeepSpeed builds its CPU communication op once, "
            f"about {reference.value('deepspeed_cpu_op_build_s'):.0f} s more "
            "(not in the times above)"
        )
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    """The CLI's `plan` command: its parsed flags' plan, as text or (--json) JSON."""
    show(PlanQuery.of(args), as_json=args.json, summary=args.summary)
    return 0


def show(query: PlanQuery, as_json: bool = False, summary: bool = False) -> None:
    """Print the plan of `query`: the table and totals (`summary`: the totals alone), or
    JSON. ArtifactError where it cannot be drawn."""
    preset, gpus, rows, memory = plan(query)
    emulated = query.emulate_world is not None
    if as_json:
        print(json.dumps(_document(preset, gpus, rows, memory, emulated), indent=1), flush=True)
    else:
        # flushed: `all` prints it before its stages' processes write to the same stdout
        print(render(preset, gpus, memory, rows, summary, emulated), flush=True)


def _document(
    preset: Preset, gpus: int, rows: list[Row], memory: tuple[float, str], emulated: bool
) -> dict:
    """The plan as --json prints it."""
    paper = _paper_items()  # None: no expected/ here (an installed wheel): nothing listed
    return {
        "preset": preset.name,
        "gpus": gpus,
        "gpu_memory_gib": memory[0] if math.isfinite(memory[0]) else None,
        "rows": [dataclasses.asdict(r) for r in rows],
        "totals": totals(rows),
        "unjudged": None if paper is None else items.unjudged(rows, paper),
        "not_judged_here": None
        if paper is None
        else items.not_applicable_here(rows, paper, preset.device, emulated),
        # each item's (state, why): on a CPU, compare's verdict on such a run
        "item_states": None if paper is None else item_states(rows, paper, preset.device, emulated),
        "methods": {k: model.method_text(k) for k in model.METHODS},
        "disk_method": model.disk_text(),
        "repetitions_method": adaptive.method_text(preset) if _adaptive(rows) else "fixed",
    }


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    """`plan ARGV`'s flags, parsed as `python -m artifact.plan` parses them."""
    ap = argparse.ArgumentParser(prog=f"{invocation()} plan", description=__doc__.splitlines()[0])
    add_arguments(ap)
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """`python -m artifact.plan` (the CLI's `plan` command calls run())."""
    return run(parse(argv))


if __name__ == "__main__":
    raise SystemExit(main())
