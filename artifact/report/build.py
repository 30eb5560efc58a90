"""OUT/ -> OUT/report/: the artifact appendix in the ACM / cTuning layout (ae.tex).

The first screen is the title, the run's facts (date, commit, GPU x count, preset, n,
the software stack against its pins), what ran and the verdicts; then the template's
sections in its order (abstract, check-list, description, installation, workflow,
evaluation, customization, notes), filled from the run. Reads only what earlier stages
wrote (summary.csv, verdicts.csv, configs.json, status/, records' provenance,
traces/fig7/*.csv) and the artifact's own inputs (expected/, pyproject.toml's pins,
artifact/data's reference times); computes no measurement of its own.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from artifact.analyze.aggregate import gpus_in
from artifact.core.config import TRAINING_PARALLELISMS
from artifact.core.emulated import STAND_IN_TEXT, stand_in_of
from artifact.core.options import beyond_paper
from artifact.figures import all_figures, paper_figures, spec_of
from artifact.judge.copies import label, plain_note
from artifact.judge.verdicts import as_sentence, paper_items, tally
from artifact.report import (
    appendix,
    emulated,
    instrument,
    mechanisms,
    mitigation,
    plots,
    rehearsal,
    validations,
)
from artifact.report.document import Doc, to_html, to_latex, to_markdown
from artifact.report.facts import (
    TITLE,
    as_value,
    collectives_library,
    declared,
    figure_status,
    hardware_line,
    not_run,
    run_dates,
    stack_deviations,
    worlds,
)
from artifact.results import Results
from artifact.store import atomic_write_text


def _evaluated_figures(verdicts: pd.DataFrame) -> str:
    """Which figures the items judged here come from, as a sentence."""
    items = paper_items(verdicts)
    judged = items[items["verdict"].isin(appendix.EVALUATED)]
    figures = [
        "the headline numbers" if f == "headline" else label(str(f))
        for f in dict.fromkeys(judged["figure"])
    ]
    if not figures:
        return "No item of the paper was judged here, either way."
    return f"The items judged here are those of {', '.join(figures)}."


def _first_line(summary: pd.DataFrame, configs: dict, verdicts: pd.DataFrame) -> str:
    gpus = gpus_in(summary)
    counts = appendix.counts_sentence(verdicts)
    if not gpus:
        return f"**Functional check on CPU: no claim of the paper was evaluated.** Every number below comes from the CPU (gloo) and checks only that the code paths run. {counts}"
    real, emulated_worlds = worlds(configs)
    n = max(real, default=1)
    where = _evaluated_figures(verdicts)
    if emulated_worlds and n == 1:  # --emulate-world: one GPU playing rank 0 of W
        ids = [c for c in configs if stand_in_of(c)]
        how = (
            " or ".join(sorted({STAND_IN_TEXT[stand_in_of(c)] for c in ids}))
            or STAND_IN_TEXT["copy"]
        )
        top = emulated.most_beside(summary, ids)
        bound = (
            f" {emulated.bound_sentence(top, emulated.paper_mean_slowdown(verdicts))}"
            if top is not None
            else ""
        )
        return f"**Emulated on 1 x {', '.join(gpus)}: rank 0 of {' and '.join(map(str, emulated_worlds))} GPUs run alone, its traffic as {how}.** No collective crossed a link, so nothing here reproduces or refutes the paper: the emulated rows are a preview, shown beside the paper's numbers and never counted (section 'Emulated W-GPU preview').{bound} {counts} {where}"
    if n == 1:
        return f"**Measured on 1 x {', '.join(gpus)}: what one GPU can judge.** Every item of the paper was measured on 4 GPUs exchanging data (each item's scope, expected/ `needs`), and with one GPU a collective moves none, so no item of the paper can be judged here, whatever the numbers; the microbenchmarks run beside labelled one-GPU proxies, shown apart and never counted. {counts} {where} The contention map is beyond the paper: it is measured, not counted among the paper's items."
    return f"**Reproduction on {n} x {', '.join(gpus)}** (the paper used 4 x A100, H100, MI250 or MI210; numbers from other GPUs are compared only through hardware-independent quantities and the claims). {counts} {where}{_training_bound(summary, configs, verdicts)}"


def _training_bound(summary: pd.DataFrame, configs: dict, verdicts: pd.DataFrame) -> str:
    """Where the training rows overlapped so little compute that Eq. 1 could not reach the
    paper's mean, that bound ('' where it could)."""
    ids = [
        c
        for c, v in configs.items()
        if v.get("parallelism") in TRAINING_PARALLELISMS and not v.get("emulated_world")
    ]
    top = emulated.most_beside(summary, ids)
    paper = emulated.paper_mean_slowdown(verdicts)
    if top is None or paper is None or emulated.eq1_bound(top) >= paper:
        return ""
    return " " + emulated.bound_sentence(top, paper, "the training rows")


def first_screen(doc: Doc, run: Results) -> None:
    """What a reviewer sees first: what this run is, and how far to trust it."""
    if run.rehearsal:
        doc.p(rehearsal.first_line(run))
    else:
        doc.p(_first_line(run.summary, run.configs, run.verdicts))
    prov, n = run.provenance, run.summary["n"].dropna().astype(int)
    first, last = run_dates(run)
    commits, presets = run.seen("git_commit"), run.seen("preset")
    reps = "-" if n.empty else f"{n.min()}" + ("" if n.min() == n.max() else f"-{n.max()}")
    facts = [
        f"**Measured:** {first} to {last[11:] if last[:10] == first[:10] else last} UTC (the records' timestamps)",
        f"**Code:** commit {', '.join(c[:12] + ('-dirty' if c.endswith('-dirty') else '') for c in commits) or '-'}",
        f"**Hardware:** {hardware_line(prov, run.configs)}",
        f"**Preset:** {', '.join(presets) or '-'}; **repetitions:** n = {reps} per configuration (a verdict needs 5)",
        f"**Stack:** torch {as_value(prov.get('torch'))}, DeepSpeed {as_value(prov.get('deepspeed'))}, Megatron-core {as_value(prov.get('megatron_core'))}, {collectives_library(prov)}, Python {as_value(prov.get('python'))}",
    ]
    deviations = stack_deviations(run.values())
    if deviations:
        facts.append(f"**Stack differs from the pins (pyproject.toml):** {'; '.join(deviations)}")
    doc.items(facts)
    shared = run.ran_on.get("other_gpu_processes", [])
    if shared:
        doc.p(
            "**Measured beside other processes on the GPU (`--allow-shared-device`): their "
            f"load is in these numbers.** {'; '.join(shared)}"
        )
    doc.h(1, "What ran")
    doc.table(
        ["figure", "status", "detail"],
        [[fig, *figure_status(fig, run.status, run.summary)] for fig in all_figures()],
    )


def verdicts_section(doc: Doc, run: Results) -> None:
    doc.h(1, "Verdicts")
    doc.p(tally(run.verdicts))
    doc.table(
        [
            "paper (source)",
            "statement",
            "expected",
            "this run: mean [95% CI]",
            "n",
            "kind",
            "verdict",
            "why",
        ],
        [appendix.verdict_row(r) for r in paper_items(run.verdicts).itertuples()],
    )
    doc.p(appendix.VERDICT_LEGEND)


def _bands(run: Results, fig: str) -> list[tuple[str, float, float, str]]:
    """The paper's numbers judged here for `fig`, as (label, low, high, metric) bands."""
    judged = run.verdicts[
        (run.verdicts["figure"] == fig)
        & run.verdicts["verdict"].isin(["reproduced", "not reproduced"])
        & (run.verdicts["tolerance"].astype(str) != "")
    ]
    return [
        (
            appendix.expected_text(r),
            float(r.expected) - float(r.tolerance),
            float(r.expected) + float(r.tolerance),
            r.metric,
        )
        for r in judged.itertuples()
    ]


def _figures_dir(run: Results) -> Path:
    return run.out / "report" / "figures"


def _rows(run: Results, fig: str) -> pd.DataFrame:
    """The summary rows `fig` is drawn from (its records')."""
    return run.summary[run.summary["figure"] == spec_of(fig).records]


def _plot(fig: str, run: Results, bands: list) -> Path | None:
    spec = spec_of(fig)
    if spec.power_trace:
        traces = sorted((run.out / "traces" / fig).glob("*-power.csv"))
        where = plots.hardware(_rows(run, fig), run.configs, with_n=False)
        return plots.power_trace_figure(fig, traces, _figures_dir(run), run.configs, where)
    if spec.panels:
        eq4 = plots.draws_eq4_ideal(spec)
        flagged = validations.unreliable_eq4(run.summary) if eq4 else frozenset()
        return plots.bar_figure(fig, run.summary, _figures_dir(run), bands, run.configs, flagged)
    return None


def figure_sections(doc: Doc, run: Results) -> list[Path]:
    """One subsection per paper figure: its plot (this run, the paper's judged numbers
    shaded) or why there is none. Returns the image files it made."""
    made = []
    for fig in paper_figures():
        title = spec_of(fig).title
        doc.h(2, f"{title} ({fig})")
        why = not_run(fig, run)
        if why:
            doc.p(as_sentence(why))
            continue
        rows = _rows(run, fig)
        bands = _bands(run, fig)
        png = _plot(fig, run, bands)
        if png is None:
            doc.p("No plot: nothing to draw for this figure in this folder.")
            continue
        made += [png, png.with_suffix(".pdf")]
        bars = not spec_of(fig).power_trace  # a trace has no repetitions to count
        caption = f"{title}. This run: {plots.hardware(rows, run.configs, with_n=bars)}"
        if bars:
            caption += "; error bars: 95% CI over repetitions"
        if bands:
            caption += "; shaded: the paper's numbers judged here, with their tolerance"
        if any(beyond_paper(run.configs.get(c, {})) for c in set(rows["config_id"])):
            caption += (
                "; FSDP2 (torch) bars go beyond the paper, beside DeepSpeed ZeRO-3 on the same "
                "points, and no verdict is drawn from them"
            )
        doc.image(f"figures/{png.name}", caption + ".")
        notes = sorted({plain_note(n) for n in rows["note"].dropna() if n})
        if notes:
            doc.items(notes)
    return made


def _contention_map(doc: Doc, run: Results, fig: str) -> list[Path]:
    return validations.contention_section(doc, fig, run.summary, run.configs, _figures_dir(run))


def _what_holds_compute_back(doc: Doc, run: Results, fig: str) -> list[Path]:
    rows, where = _rows(run, fig), _figures_dir(run)
    return mechanisms.section(doc, rows, run.configs, run.verdicts, where, bool(run.gpus))


def _what_frees_the_compute(doc: Doc, run: Results, fig: str) -> list[Path]:
    return mitigation.section(doc, _rows(run, fig), run.configs, _figures_dir(run))


# The sections after the paper's figures that a spec declares (FigureSpec.report_sections),
# by kind: (heading, what writes it and returns the image files it made)
SECTIONS = {
    "contention map": ("Beyond the paper: contention map", _contention_map),
    "what holds compute back": ("What holds compute back on one GPU", _what_holds_compute_back),
    "what frees the compute": ("What frees the compute", _what_frees_the_compute),
}


def declared_sections(doc: Doc, run: Results) -> list[Path]:
    """Each figure's declared sections, in the registry's order, or why its figure has
    nothing to show; returns the image files they made."""
    made = []
    for fig, (heading, write), why in declared(run, SECTIONS):
        doc.h(2, heading)
        if why:
            doc.p(as_sentence(why))
        else:
            made += write(doc, run, fig)
    return made


def evaluation(doc: Doc, run: Results) -> list[Path]:
    """Section F; returns the image files it made."""
    doc.h(1, "F. Evaluation and expected results")
    doc.p(
        "Every number and claim of the paper that the artifact tests is in `expected/*.yaml`, with its source, hardware scope and tolerance; 'Verdicts' above judges each on this run. Which experiment tests which item:"
    )
    doc.table(
        [
            "experiment",
            "command",
            "paper items it tests",
            "verdicts here",
            "time (this run)",
        ],
        appendix.claims_to_experiments(run),
    )
    made = figure_sections(doc, run)
    made += declared_sections(doc, run)
    validations.validation_sections(doc, run)
    validations.power_sampling(doc, run.summary, run.provenance)
    instrument.passes_section(doc, run.summary)
    return made


def build(out: Path) -> tuple[Doc, list[Path]]:
    run = Results.load(out)
    first, _ = run_dates(run)
    doc = Doc(title=TITLE, date=f"Measured {first}" if run.ran_on.get("timestamps") else "")
    first_screen(doc, run)
    rehearsal.section(doc, run)
    instrument.controls_section(doc, run.verdicts)
    verdicts_section(doc, run)
    instrument.proxy_section(doc, run.verdicts)
    emulated.preview_section(doc, run)
    appendix.abstract(doc, run)
    appendix.checklist(doc, run)
    appendix.description(doc, run)
    appendix.installation(doc)
    appendix.workflow(doc)
    made = evaluation(doc, run)
    appendix.customization(doc)
    appendix.notes(doc, run)
    appendix.glossary(doc)
    return doc, made


def write_report(out: Path) -> Path:
    out = Path(out)
    doc, _ = build(out)
    report = out / "report"
    atomic_write_text(report / "appendix.md", to_markdown(doc))
    atomic_write_text(report / "appendix.html", to_html(doc, report))
    atomic_write_text(report / "appendix.tex", to_latex(doc))
    return report
