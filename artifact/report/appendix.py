"""The ACM / cTuning artifact appendix (ae.tex) sections, filled from the run: abstract,
check-list (meta-information), description, installation, experiment workflow,
customization and notes; and the verdict rows in the paper's words and units."""

from __future__ import annotations

import math
import tomllib

from artifact.core.config import TRAINING_PARALLELISMS, get_preset
from artifact.core.units import duration, size
from artifact.env import REPO_ROOT
from artifact.estimate import reference
from artifact.estimate.model import build, figures_of, totals
from artifact.figures import KICK_THE_TIRES as KICKED
from artifact.figures import REGISTRY, all_figures, own_records, spec_of
from artifact.judge.copies import label
from artifact.judge.expected import load_expected
from artifact.judge.verdicts import VERDICTS, paper_items
from artifact.report.document import Doc
from artifact.report.facts import (
    PINNED,
    PROVENANCE_KEYS,
    as_value,
    folder_bytes,
    hardware_line,
    not_run,
    pins,
    stack_deviations,
    world_text,
)
from artifact.report.glossary import GLOSSARY
from artifact.report.plots import model_name
from artifact.report.runtime import figure_time
from artifact.results import Results, is_proxy

EVALUATED = ("reproduced", "not reproduced", "inconclusive")  # judged either way, or not yet

VERDICT_LEGEND = (
    "Expected: the paper's number with the tolerance expected/*.yaml gives it (its reason is there), or the claim's test. "
    "Ratios are shown in % and tolerances in percentage points (pts); '% of TDP' is power as a share of the enforced power limit. "
    "Kind: measured (timers, profiler traces, power sampler) or derived (an equation on measured means, e.g. Eq. 1's slowdown). "
    "n: the fewest repetitions among the rows judged (a verdict needs 5). "
    "Not reproduced: the CIs show the opposite of the paper's item; inconclusive: they show neither (too few repetitions, a slowdown within its noise floor, or CIs that reach across the claim's line). "
    "(s) in a source marks a secondary reading of the paper (read off a chart or inferred from its text)."
)
# compare's wording of a claim's test -> the paper's words
CLAIM_WORDS = {
    "> 0": "above 0 in every configuration",
    "power_overlap_pct_tdp": "power in overlap windows",
    "power_compute_only_pct_tdp": "power in compute-only windows",
    "increases with params": "rises with model size",
    "decreases with power_cap_w": "falls as the power cap rises",
    "parallelism fsdp": "FSDP",
    "parallelism pipeline": "pipeline",
    "precision fp32": "FP32",
    "precision fp16": "FP16",
    "precision tf32": "TF32",
}
# README's set-up line: nox in a virtual environment of its own (PEP 668 distributions)
SETUP = "python3 -m venv .nox-venv && .nox-venv/bin/pip install -q nox==2026.10.20"
NOX = ".nox-venv/bin/nox"
KICK_THE_TIRES = (
    f"{NOX} -s {KICKED[0]} -- --out results/kick && "
    f"{NOX} -s {KICKED[1]} -- --out results/kick && {NOX} -s report -- results/kick"
)
# what is pinned where (README, requirements/): stated as it is, no more
PINS_STATEMENT = "The `.venv/` path installs every other package at the version requirements/constraints.txt gives (a freeze of the CPU environment, without hashes) and, on a GPU machine, torch's CUDA packages (nvidia-*, triton) at the versions of requirements/constraints-gpu.txt (taken from lock-cuda.txt, resolved for Python 3.12 on x86-64). The Docker images install from hashed lock files (requirements/lock-*.txt) on a base image pinned by digest. Not pinned: the NVIDIA driver, CUDA/ROCm system libraries outside the images, and the operating system."
PAPER_GPUS, PAPER_GPU_GIB = 4, 80.0  # the paper's node: 4 GPUs (A100 / H100: 80 GiB)


def _number(x: float, unit: str) -> str:
    return f"{100 * x:.3g}" if unit == "ratio" else f"{x:.4g}"


def in_unit(x: float, unit: str, metric: str) -> str:
    """0.189 ('ratio') -> '18.9 %'; 140 ('%', a *_pct_tdp metric) -> '140 % of TDP'."""
    if unit in ("ratio", "%"):
        tdp = " of TDP" if str(metric).endswith("_pct_tdp") else ""
        return f"{_number(x, unit)} %{tdp}"
    return f"{x:.4g} {unit}".strip()


def unit_of(r) -> str:
    """The verdict's unit; where the run measured nothing of its metric (verdicts.csv's unit
    is empty), expected/'s own convention: % of TDP for *_pct_tdp, otherwise a ratio."""
    if str(r.unit):
        return str(r.unit)
    return "%" if str(r.metric).endswith("_pct_tdp") else "ratio"


def expected_text(r) -> str:
    """The paper's number with its unit and tolerance, or the claim's test in words."""
    if str(r.tolerance) == "":
        text = str(r.expected)
        for words, plain in CLAIM_WORDS.items():
            text = text.replace(words, plain)
        return text or "the claim holds"
    value, tol, unit = float(r.expected), float(r.tolerance), unit_of(r)
    spread = f"{_number(tol, unit)} pts" if unit in ("ratio", "%") else f"{tol:g} {unit}"
    return f"{in_unit(value, unit, r.metric)} ± {spread}".strip()


def measured_text(r) -> str:
    """This run's mean and 95 % CI in the verdict's unit; a claim between two groups or
    metrics shows the difference of their means."""
    if r.mean is None or math.isnan(float(r.mean)):
        return "-"
    mean, unit = float(r.mean), unit_of(r)
    if " above " in str(r.expected):  # group_greater / metric_greater: a difference of means
        pts = unit in ("ratio", "%")
        return (
            f"difference {_number(mean, unit) if pts else f'{mean:.4g}'} {'pts' if pts else unit}"
        )
    if math.isnan(float(r.ci_low)):
        return in_unit(mean, unit, r.metric)
    return (
        f"{in_unit(mean, unit, r.metric)} [{_number(r.ci_low, unit)}, {_number(r.ci_high, unit)}]"
    )


def _source(source: str) -> str:
    """compare's 'section V; figure Fig. 4; gpu H100; ...' -> 'Fig. 4, Sec. V; H100; ...'."""
    parts = dict(p.split(" ", 1) for p in str(source).split("; ") if " " in p)
    sections = [
        x if x.startswith("Abstract") else f"Sec. {x}"
        for x in parts.pop("section", "").split(", ")
        if x
    ]
    head = ", ".join(x for x in (parts.pop("figure", ""), *sections) if x)
    rest = [f"all {key}s" if value == "all" else value for key, value in parts.items()]
    return "; ".join([head, *rest]) if head or rest else "-"


def verdict_row(r) -> list[str]:
    n = "-" if r.n is None or (isinstance(r.n, float) and math.isnan(r.n)) else f"{int(r.n)}"
    statement = str(r.statement) or str(r.item)
    return [
        _source(r.source),
        statement,
        expected_text(r),
        measured_text(r),
        n,
        str(r.kind) or "-",
        r.verdict,
        r.reason,
    ]


def paper_counts(verdicts) -> dict[str, int]:
    """The paper's items by verdict (verdicts.paper_items: never the checks, controls or
    proxies), 'items' in all and 'evaluated' (reproduced, not reproduced, inconclusive)."""
    items = paper_items(verdicts)
    seen = items["verdict"].value_counts()
    counts = {v: int(seen.get(v, 0)) for v in VERDICTS}
    evaluated = sum(counts[v] for v in EVALUATED)
    return {"items": len(items), "evaluated": evaluated, **counts}


def counts_sentence(verdicts) -> str:
    """'4 of the paper's 26 items were evaluated here (1 reproduced, 3 inconclusive); 20
    were not applicable and 2 not run, each with its reason.'"""
    c = paper_counts(verdicts)
    parts = ", ".join(f"{c[v]} {v}" for v in EVALUATED if c[v])
    parts = f" ({parts})" if parts else ""
    rest = [f"{c[v]} {'was' if c[v] == 1 else 'were'} {v}" for v in VERDICTS if v not in EVALUATED and c[v]]  # fmt: skip
    tail = f"; {' and '.join(rest)}, each with its reason" if rest else ""
    verb = "was" if c["evaluated"] == 1 else "were"
    return f"{c['evaluated']} of the paper's {c['items']} items {verb} evaluated here{parts}{tail}."


def claims_to_experiments(run: Results) -> list[list[str]]:
    """One row per experiment: the paper items (expected/*.yaml) whose rows it records,
    their verdicts here, and this run's time; an item two experiments test is listed
    under both, and a last row counts every item once (it agrees with verdicts.csv)."""
    items_here = paper_items(run.verdicts)
    by_item = items_here.set_index("item")["verdict"].to_dict()
    tested: dict[str, list[dict]] = {}
    for item in load_expected():
        if item.id not in by_item:
            continue  # compare did not write it (an older verdicts.csv): nothing to count
        for fig in item.figures:
            tested.setdefault(spec_of(fig).records, []).append(item)
    rows = []
    for exp in (e for e in own_records() if e in tested):
        served = [f for f, s in REGISTRY.items() if s.records_of == exp]
        label = exp + (f" (also {', '.join(served)})" if served else "")
        items = list({i.id: i for i in tested[exp]}.values())
        here = [by_item[i.id] for i in items]
        tally = ", ".join(f"{here.count(v)} {v}" for v in dict.fromkeys(here))
        rows.append([label, f"`nox -s {exp}`", "; ".join(i.statement for i in items), tally, _run_time(run, exp)])  # fmt: skip
    c = paper_counts(run.verdicts)
    every = ", ".join(f"{c[v]} {v}" for v in VERDICTS if c[v])
    rows.append(["all", "`nox -s all`", f"{c['items']} items, each counted once", every, "-"])
    return rows


def abstract(doc: Doc, run: Results) -> None:
    doc.h(1, "A. Abstract")
    doc.p(
        "This artifact measures how much compute kernels slow down when NCCL/RCCL collectives run beside them during distributed training (DeepSpeed ZeRO-3 as the paper's FSDP, Megatron-core pipeline parallelism) and in a matmul/all-reduce microbenchmark, what that does to iteration time and GPU power, and judges the paper's numbers and claims against the results. "
        f"This report is of one run on {hardware_line(run.provenance, run.configs)}: {counts_sentence(run.verdicts)}"
    )


def _run_time(run: Results, exp: str) -> str:
    """This run's time for `exp`, from its records' timestamps and its log."""
    t = figure_time(run.out, exp)
    if t is None:
        return "no records"
    copies = ", ".join(f"{n} copied from {src}" for src, n in sorted(t.copied.items()))
    if not t.records:
        return f"no time of its own ({copies}, the same configurations)"
    text = f"{duration(t.active_s)} ({t.records} records measured" + (
        f"; {copies})" if copies else ")"
    )
    if t.pauses_s:
        text += (
            f"; paused {len(t.pauses_s)} time(s), {duration(sum(t.pauses_s))} in all, not counted"
        )
    if t.starts > 1:
        text += f"; started {t.starts} times (resumed)"
    if t.wall_s is not None:
        text += f"; {duration(t.wall_s)} from start to end, start-up and set-up in"
    return text


# The measured quick runs in package data, by the GPU model they ran on.
QUICK_REFERENCES = {"H200": "quick_h200_measured_s", "H100": "quick_h100_measured_s"}


def _reference_name(run: Results) -> str | None:
    """The measured reference that matches this run's preset and hardware, if any."""
    presets = run.seen("preset")
    if presets == ["tiny"]:
        return "tiny_measured_s"
    if presets == ["quick"]:
        model = str(run.provenance.get("gpu_model"))
        return next((name for gpu, name in QUICK_REFERENCES.items() if gpu in model), None)
    return None


def _time_rows(run: Results) -> tuple[list[str], list[list[str]]]:
    """Time per experiment: this run's (records' timestamps), the reference measured on
    the same preset and hardware where there is one, and the plan's estimate of the paper
    preset on the paper's 4 GPUs."""
    paper, ref = get_preset("paper"), _reference_name(run)
    header = [
        "experiment",
        "this run: measuring, first to last record (pauses left out), then start to end (start-up, set-up and the first repetition in)",
    ]
    if ref:
        header.append("reference run, measured (whole figure)")
    header.append(
        f"paper preset, {PAPER_GPUS} x {PAPER_GPU_GIB:g} GiB GPUs (plan's lower bound, each experiment alone: run together, `all` copies shared configurations' records)"
    )
    rows = []
    for exp in own_records():
        est = totals(build(paper, [exp], PAPER_GPUS, PAPER_GPU_GIB))
        if est["configurations"] == 0:
            priced = "not priced: " + (
                "opt-in (`--allow-power-cap`)" if spec_of(exp).caps_power else "no configuration"
            )
        else:
            priced = duration(est["time_s"])
            if est["fit"] < est["configurations"]:
                priced += f" ({est['fit']} of {est['configurations']} configurations fit)"
        served = [f for f, s in REGISTRY.items() if s.records_of == exp]
        label = exp + (f" (also {', '.join(served)})" if served else "")
        row = [label, _run_time(run, exp)]
        if ref:  # a figure added since the reference run has no time there
            measured = reference.values(ref).get(exp)
            row.append(duration(measured) if measured is not None else "not in the reference run")
        rows.append([*row, priced])
    return header, rows


def _license() -> str:
    path = REPO_ROOT / "pyproject.toml"
    if not path.is_file():
        return "-"
    return tomllib.loads(path.read_text())["project"].get("license", {}).get("text", "-")


def _models(run: Results) -> str:
    training = run.summary["parallelism"].isin(TRAINING_PARALLELISMS)
    trained = sorted({model_name(m) for m in run.summary.loc[training, "model"]})
    return ", ".join(trained) or "none (no training figure ran)"


def _figures_line(run: Results) -> str:
    def name(f: str) -> str:
        of = spec_of(f).records_of
        return f"{f} (from {of}'s records)" if of else f

    ran = [name(f) for f in all_figures() if not not_run(f, run)]
    skipped = [name(f) for f in all_figures() if not_run(f, run)]
    return f"ran {', '.join(ran) or 'none'}" + (
        f"; not run or failed: {', '.join(skipped)}" if skipped else ""
    )


def _reference_runs() -> str:
    """The measured reference runs' totals, for the check-list's time line."""
    runs = [f"{duration(sum(reference.values('tiny_measured_s').values()))} on 2 CPU cores (tiny)"]
    for gpu, name in QUICK_REFERENCES.items():
        runs.append(f"{duration(sum(reference.values(name).values()))} on one {gpu} (quick)")
    # the references ran the quick of their commits (reference.source names each); the plan
    # prices today's
    quick = totals(build(get_preset("quick"), figures_of([]), 1, PAPER_GPU_GIB))["time_s"]
    return ", ".join(runs) + f"; quick on one GPU by this commit's plan: {duration(quick)}"


def checklist(doc: Doc, run: Results) -> None:
    doc.h(1, "B. Artifact check-list (meta-information)")
    prov = run.provenance
    paper = totals(build(get_preset("paper"), figures_of([]), PAPER_GPUS, PAPER_GPU_GIB))
    disk = {part: folder_bytes(run.out / part) for part in ("records", "traces", "logs")}
    shared = bool(run.ran_on.get("other_gpu_processes"))
    here = [t for f in own_records() if (t := figure_time(run.out, f))]
    walls = [t.wall_s for t in here if t.wall_s is not None]
    this_run = f"this run: {duration(sum(t.active_s for t in here))} of measuring (the records' timestamps)" if here else "this run: no records"  # fmt: skip
    if walls:
        this_run += (
            f", {duration(sum(walls))} from start to end with start-up and set-up (the logs)"
        )
    doc.items(
        [
            "**Algorithm:** the paper's Eq. 1 (compute slowdown), Eq. 3 and Eq. 4 (ideal E2E, derived), the sequential penalty; overlap fraction by an interval sweep over profiler traces; 95% CIs over repetitions. Terms: section I (glossary).",
            f"**Program:** PyTorch {as_value(prov.get('torch'))}, DeepSpeed {as_value(prov.get('deepspeed'))}, Megatron-core {as_value(prov.get('megatron_core'))}, NCCL {as_value(prov.get('nccl'))} (this run; what is pinned: C.3), NVML / AMD-SMI.",
            "**Compilation:** none (Python). On a CPU, DeepSpeed builds its shared-memory op on first use (about 40 s).",
            f"**Model:** GPT-3 1.3B-13B and LLaMA-2 13B shapes (artifact/core/config.py), randomly initialised; no weights are downloaded. This run: {_models(run)}.",
            "**Data set:** synthetic token sequences made on the device (artifact/workloads/models.py); nothing is downloaded.",
            f"**Run-time environment:** Linux, Python {as_value(prov.get('python'))}; the Docker images (Dockerfile.cuda, Dockerfile.rocm) pin the whole stack.",
            f"**Hardware:** this run: {hardware_line(prov, run.configs)}. The paper: 4 GPUs of one node (A100, H100, MI250 or MI210). Requirements: C.2.",
            f"**Run-time state:** an idle GPU (GPUs another process uses are refused unless `--allow-shared-device`; this run: {'shared, flagged above' if shared else 'not shared'}); power limits are changed only by fig9 with `--allow-power-cap`, and restored.",
            "**Execution:** `nox -s all`: torchrun starts one process per GPU; each repetition runs every phase (overlap, sequential, nocomm, the A/A repeat of overlap, and on several GPUs the zero-byte controls) in its row of a balanced order; each phase settles, is timed under the power sampler, then profiled.",
            "**Metrics:** kernel time by class, E2E iteration time, overlap fraction, MFU, power (mean from the energy counter, peak from the instant field) and energy.",
            "**Output:** summary.csv, verdicts.csv, this report (Markdown, HTML, LaTeX) and its figures.",
            f"**Experiments:** this run {_figures_line(run)}.",
            f"**How much disk space is required (approximately)?** This run's folder holds records {size(disk['records'])}, profiler traces {size(disk['traces'])} and logs {size(disk['logs'])}. The pinned `.venv/` about 1.6 GiB; the CUDA image 8-10 GB (docs/docker.md); the paper preset's records and traces about {size(paper['disk_bytes'])} (the plan's estimate).",
            "**How much time is needed to prepare the workflow (approximately)?** About 2.5 min for `.venv/` on 2 CPU cores (the first nox session); a Docker build downloads about as much.",
            f"**How much time is needed to complete experiments (approximately)?** {this_run}. Measured reference runs: {_reference_runs()}; on 4 GPUs of 80 GiB (paper) at least the plan's estimate below. Per experiment:",
        ]
    )
    header, rows = _time_rows(run)
    doc.table(header, rows)
    if _reference_name(run):
        name = _reference_name(run)
        doc.p(f"Reference run: {reference.source(name)}.")
    doc.items(
        [
            "**Publicly available?** Yes: this repository.",
            f"**Code licenses:** {_license()} (LICENSE).",
            "**Data licenses:** none: no data set is used.",
            "**Workflow framework used?** nox (noxfile.py: one session per experiment, `all`, `report`, `tests`); Docker.",
            "**Archived (DOI)?** Not yet.",
            "**Badges sought:** Artifacts Evaluated - Functional (any CPU or GPU: the tiny preset runs every code path); Results Reproduced (needs 4 GPUs of one node: with fewer, the overlap claims are not applicable). Artifacts Available is not sought until the artifact is archived with a DOI.",
        ]
    )


def description(doc: Doc, run: Results) -> None:
    doc.h(1, "C. Description")
    doc.h(2, "C.1 How to access")
    doc.p(
        f"This repository (this run: commit {as_value(run.provenance.get('git_commit'))[:12]}), {_license()}; the images build from Dockerfile.cuda and Dockerfile.rocm (docs/docker.md)."
    )
    doc.h(2, "C.2 Hardware dependencies")
    quick = build(get_preset("quick"), figures_of([]), 1, 141.0)
    paper = totals(build(get_preset("paper"), figures_of([]), PAPER_GPUS, PAPER_GPU_GIB))
    fits_141 = totals(build(get_preset("paper"), figures_of([]), PAPER_GPUS, 141.0))
    peak = max(r.memory_gib or 0 for r in quick)
    doc.items(
        [
            "**GPUs:** 4 of one node for the paper's claims (a collective on one GPU moves no data: the training figures' overlap items are then not applicable); 1 GPU for the quick preset; a CPU for the tiny functional check. NVIDIA (CUDA 13, driver R580 or newer) or AMD (ROCm).",
            f"**GPU memory:** quick needs at most {peak:.0f} GiB per GPU (artifact.estimate.memory's estimate, FP32 rows); paper on 4 GPUs: {paper['fit']} of {paper['configurations']} configurations fit 80 GiB, {fits_141['fit']} fit 141 GiB; the rest are recorded 'not run' with their estimate (`nox -s plan -- --preset paper --gpus 4`).",
            "**Interconnect:** the collectives run over the node's GPU links (NVLink / NVSwitch, AMD Infinity Fabric, or PCIe); their bandwidth sets how long communication runs beside compute, so slowdowns are comparable only on similar links. Several nodes: torchrun rendezvous (docs/slurm.md).",
            "**Root, for fig9 only:** setting power limits needs root on the GPU (`--allow-power-cap`; in Docker `--user root --cap-add SYS_ADMIN`, docs/docker.md). Without it fig9 is recorded 'not run' and nothing on the GPU changes.",
            "**Power telemetry:** NVML or AMD-SMI for Figs. 6 and 7 and every power number; without it those are 'not run'.",
        ]
    )
    doc.h(2, "C.3 Software dependencies")
    pinned = pins()
    deviations = stack_deviations(run.values(), pinned)
    doc.p(
        f"Pinned by version in pyproject.toml: {', '.join(f'{d} {pinned[d]}' for d in PINNED.values() if d in pinned)}. {PINS_STATEMENT} "
        + (
            f"**This run differs from the pins:** {'; '.join(deviations)}."
            if deviations
            else "This run used the pinned versions."
        )
    )
    doc.h(2, "C.4 Data sets")
    doc.p(
        "None: token sequences are synthetic, made on the device from a seeded random pattern (artifact/workloads/models.py, `synthetic_batch`)."
    )
    doc.h(2, "C.5 Models")
    doc.p(
        f"GPT-3 XL (1.3B), 2.7B, 6.7B, 13B and LLaMA-2 13B, built from their papers' shapes (artifact/core/config.py), randomly initialised. This run: {_models(run)}."
    )
    doc.h(2, "C.6 What differs from the paper's setup")
    doc.items(deviations_from_paper(run))


def deviations_from_paper(run: Results) -> list[str]:
    """What this run does differently from the paper (PAPER.md's setup), stated plainly."""
    prov = run.provenance
    gpu = prov.get("gpu_model") if prov.get("gpu_count") else "no GPU (CPU processes over gloo)"
    out = [
        f"Hardware: this run used {gpu}, {world_text(run.configs)}; the paper used 4 GPUs of one node (A100, H100, MI250 or MI210).",
        "Figs. 6 and 9 (power, and performance under power caps) are measured on the Fig. 8 matmul/all-reduce microbenchmark; the paper measured them during training.",
        "Megatron-core runs without NVIDIA Transformer Engine and without Apex (plain PyTorch layers, SDPA attention); the paper used Megatron-LM as released, which can use both.",
        "FSDP is DeepSpeed ZeRO stage 3, as the paper's text suggests; the paper does not state its sequence length (GPT-3's 2048 is used; the quick preset shortens it).",
        f"Software: PyTorch {as_value(prov.get('torch'))}, NCCL {as_value(prov.get('nccl'))} here; the paper used PyTorch 2.4 with CUDA 12.4 or ROCm 6.2.",
        "Models are randomly initialised and fed synthetic tokens: timing and power do not depend on the weights' values.",
    ]
    if run.seen("preset") and run.seen("preset") != ["paper"]:
        out.append(
            f"Preset {', '.join(run.seen('preset'))}: fewer models, batch sizes and repetitions than the paper preset (README, 'What runs where')."
        )
    return out


def installation(doc: Doc) -> None:
    doc.h(1, "D. Installation")
    doc.p(
        f"On Linux with Python 3.11 or newer (on Debian or Ubuntu, install `python3-venv` first): `{SETUP}` builds nox in a virtual environment of its own, then `.venv/` from the pins on first use (about 2.5 min, 1.6 GiB). Or the image: `docker build -f Dockerfile.cuda -t overlap-artifact:cuda .` (run flags in docs/docker.md)."
    )


def workflow(doc: Doc) -> None:
    doc.h(1, "E. Experiment workflow")
    doc.p(
        "`nox -s all` prints the plan (memory, time and disk of every configuration), runs every experiment into one folder (`results/<time>-<preset>/`), going on past a failing one, then `summarize` (summary.csv, 95% CIs), `compare` (verdicts.csv) and `report` (this appendix). In each experiment torchrun starts one process per GPU; each repetition runs every phase in its row of a balanced (Williams) order, each settled, timed and profiled (training times its phases together, in interleaved rounds); records are written atomically and a new run into the same folder resumes where the last one stopped."
    )
    quick, tiny = (reference.values(n) for n in ("quick_h200_measured_s", "tiny_measured_s"))
    micro, training = KICKED
    doc.p(
        f"**Kick the tires:** `{KICK_THE_TIRES}`. It runs the {label(micro)} microbenchmark ({duration(quick[micro])} on one H200 in the reference run) and the smallest training configuration of Figs. 4 and 5 ({duration(quick[training])}), five repetitions each (the quick preset's, the fewest a verdict accepts), then the verdicts and this report; the first session also builds `.venv/`. On a CPU the same line runs the tiny preset: {micro} {duration(tiny[micro])} and {training} {duration(tiny[training])} on 2 CPU cores, plus about 40 s the first time for DeepSpeed's CPU op."
    )


def customization(doc: Doc) -> None:
    doc.h(1, "G. Experiment customization")
    doc.p(
        "`nox -s figN -- --preset quick|paper --models ... --reps N --precision ... --out DIR`; `nox -s fig8 -- --help` lists every option; `nox -s plan -- --preset paper --gpus 4 --gpu-memory-gib 80` says what a run will cost before it starts. New figures and models: docs/extending.md."
    )


def _caps_note(fig: str, run: Results) -> str | None:
    """What a figure that caps the GPU's power (FigureSpec.caps_power) did to the limit, or
    would have done, as its status recorded it; None where it says nothing."""
    status = run.status.get(fig, {})
    if status.get("status") == "not run" and status.get("planned_caps_w"):
        caps = ", ".join(f"{c:g}" for c in status["planned_caps_w"])
        return f"{label(fig)} did not run ({status.get('reason')}); it would have capped the GPU at {caps} W and restored {as_value(status.get('limit_w'))} W."
    if status.get("status") == "ran":
        return f"{label(fig)} changed the GPU's power limit and restored it (status/{fig}.json)."
    return None


def _run_notes(run: Results) -> list[str]:
    """What a reader must know about this run's numbers, from what it recorded."""
    summary, notes = run.summary, []
    if not run.provenance.get("gpu_count"):
        notes.append(
            "Every row comes from a CPU (gloo): a functional check; no claim of the paper is evaluated."
        )
    proxies = sorted({p for p in summary["parallelism"].astype(str) if is_proxy(p)})
    if proxies:
        notes.append(
            f"One GPU: the microbenchmarks used labelled proxies for the all-reduce ({', '.join(proxies)}); the paper's items judged on their rows are under 'Proxy evidence', never counted."
        )
    if any("shim" in str(n) for n in summary["note"].dropna()):
        notes.append(
            "Megatron-core ran on the CPU through a CUDA-to-CPU shim (the rows' notes say so)."
        )
    notes += [n for fig, s in REGISTRY.items() if s.caps_power and (n := _caps_note(fig, run))]
    for deviation in stack_deviations(run.values()):
        notes.append(f"Measured with {deviation}: a run on the pinned stack may differ.")
    return notes or ["Nothing unusual was recorded."]


def adaptive_repetitions(doc: Doc, run: Results) -> None:
    """Each configuration run with --adaptive: its repetitions, of the most, and why (none
    that stopped early is left unsaid)."""
    if not run.stopping:
        return
    doc.h(2, "Adaptive repetitions (--adaptive)")
    doc.p(
        "These configurations ran the stopping rule (docs/measurement.md, 'Adaptive repetitions'): a pilot of 5 repetitions, then as many as their judged quantities need, decided once (records/FIGURE/CONFIG/stopping.json). The quantities they were stopped by report at least Stein's interval (summary.csv's ci_method says so)."
    )
    doc.table(
        ["figure", "configuration", "repetitions", "why"],
        [
            [figure, config_id, f"{d['n']} of {d['max']}", d["why"]]
            for (figure, config_id), d in sorted(run.stopping.items())
        ],
    )


def notes(doc: Doc, run: Results) -> None:
    doc.h(1, "H. Notes")
    doc.items(_run_notes(run))
    doc.h(2, "What was not run, or failed, and why")
    missing = [f"{fig}: {why}" for fig in all_figures() if (why := not_run(fig, run))]
    missing += [
        f"{fig}: {config_id}: {st['status']}: {st['reason']}"
        for fig, fst in run.status.items()
        for config_id, st in sorted(fst.get("configs", {}).items())
    ]
    prov = run.provenance
    if prov.get("world_size") == 1 and prov.get("gpu_count"):
        missing.append(
            "contention map, NCCL CTA-limit ablation: needs 2+ GPUs (one rank's NCCL kernel ignores CTA limits)"
        )
    if prov.get("gpu_count", 0) in (0, None):
        missing.append("every GPU measurement: no GPU on this machine")
    if prov.get("device_kind") != "rocm":
        missing.append(
            "AMD GPUs (MI250, MI210; half of the paper's systems): this machine has none"
        )
    doc.items(missing)
    adaptive_repetitions(doc, run)
    doc.h(2, "Environment and provenance")
    pinned = pins()
    doc.table(
        ["key", "value", "pinned"],
        [
            [k, str(prov.get(k, "-")), pinned.get(PINNED.get(k, ""), "")]
            for k in (*PROVENANCE_KEYS, "nvidia_ml_py")
        ],
    )
    doc.h(2, "Methodology")
    doc.p(
        "Submission, reviewing and badging: ACM's Artifact Review and Badging (https://www.acm.org/publications/policies/artifact-review-and-badging-current) and the cTuning artifact evaluation guidelines (https://ctuning.org/ae/). How every number is measured: docs/measurement.md and docs/design.md."
    )


def glossary(doc: Doc) -> None:
    doc.h(1, "I. Glossary")
    doc.table(["term", "meaning"], [list(t) for t in GLOSSARY])
