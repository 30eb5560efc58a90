"""Sections beyond the paper: the contention map, the validations the paper lacks (V1,
V2, the consistency of the timed and profiled passes, V3) and the power sampling.

Their content is computed as it always was (the V1/V2 rows move into compare's verdicts
later); each renders in a section function of its own.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from artifact.analyze.aggregate import by_key, v2_delays
from artifact.judge.verdicts import as_sentence
from artifact.report import plots
from artifact.report.document import Doc
from artifact.report.facts import declared
from artifact.results import Results

CONSISTENCY_MARGIN = 0.02  # the profiled pass's device span may exceed timed E2E by this


def fmt(x) -> str:
    try:
        return "-" if x is None or math.isnan(float(x)) else f"{float(x):.4g}"
    except (TypeError, ValueError):
        return str(x)


def pct(x) -> str:
    """A ratio as a percentage: 0.0123 -> '1.23 %' (the figures plot ratios in %)."""
    try:
        return "-" if x is None or math.isnan(float(x)) else f"{100 * float(x):.3g} %"
    except (TypeError, ValueError):
        return str(x)


def label(configs: dict, config_id: str) -> str:
    """A configuration as people read it ('8192³ matmul, copy proxy, BF16, 1 GiB')."""
    if "model" not in configs.get(config_id, {}):
        return config_id
    return ", ".join(v for v in plots.config_fields(configs[config_id]).values() if v)


def _rows(summary: pd.DataFrame, metric: str, mode: str | None = None) -> pd.DataFrame:
    sel = summary[summary["metric"] == metric]
    return sel if mode is None else sel[sel["mode"] == mode]


def _cell(rows: pd.DataFrame, figure: str, config_id: str, mode: str, *metrics: str) -> str:
    """The mean of the first of `metrics` that `rows` (aggregate.by_key) has, or '-'."""
    for metric in metrics:
        if (figure, config_id, mode, metric) in rows.index:
            return fmt(rows.loc[(figure, config_id, mode, metric), "mean"])
    return "-"


def _pct_cell(rows: pd.DataFrame, figure: str, config_id: str, mode: str, metric: str) -> str:
    key = (figure, config_id, mode, metric)
    return pct(rows.loc[key, "mean"]) if key in rows.index else "-"


def _pct_ci(rows: pd.DataFrame, figure: str, config_id: str, mode: str, metric: str) -> str:
    key = (figure, config_id, mode, metric)
    if key not in rows.index or pd.isna(rows.loc[key, "ci_low"]):
        return "-"
    return f"[{pct(rows.loc[key, 'ci_low'])}, {pct(rows.loc[key, 'ci_high'])}]"


def _n(rows: pd.DataFrame, figure: str, config_id: str, mode: str, metric: str) -> str:
    key = (figure, config_id, mode, metric)
    if key not in rows.index or pd.isna(rows.loc[key, "n"]):
        return "-"
    return f"{int(rows.loc[key, 'n'])}"


def validation_sections(doc: Doc, run: Results) -> None:
    """V1, the validations a spec declares (V2: compare's check rows beside the numbers
    they judge), consistency, V3."""
    summary, configs = run.summary, run.configs
    checks = run.verdicts[run.verdicts["item_type"] == "check"]
    doc.h(2, "Validations the paper lacks")
    v1_section(doc, summary, checks, configs)
    for fig, (heading, write), why in declared(run, VALIDATIONS):
        doc.h(3, heading)
        if why:
            doc.p(as_sentence(why))
        else:
            write(doc, fig, summary, configs, checks[checks["figure"] == fig])
    consistency_section(doc, summary)
    v3_section(doc, summary, configs)


def v1_section(doc: Doc, summary: pd.DataFrame, checks: pd.DataFrame, configs: dict) -> None:
    v1 = _rows(summary, "v1_baseline_gap", "derived")
    verdict = checks.set_index(["figure", "config_id"])["verdict"].to_dict()
    # a configuration whose records another figure measured: listed, counted once there
    same = checks.set_index(["figure", "config_id"]).get("same_records_as", pd.Series(dtype=str))
    same = {k: v for k, v in same.to_dict().items() if isinstance(v, str) and v}
    doc.h(3, "V1: the sequential baseline vs compute with no communication")
    doc.p(
        "Holds where the whole 95% CI of (ComputeSequential - ComputeNocomm) / ComputeNocomm lies within compare's margin (V1_MARGIN in artifact/judge/validation.py, ±1 %; verdicts.csv has each configuration's row), fails where it lies wholly outside, and is inconclusive where it crosses the margin or rests on fewer than 5 repetitions (the n column): a wide interval is no evidence that the baselines agree. Differences below the margin are smaller than what the paper's 25-run averages resolve, and with tight CIs a strict 'contains 0' would fail gaps of 0.1%. A failure is a finding, not a fault: on a power-limited GPU, compute that runs back to back (nocomm) can run at lower clocks than the same compute between communication gaps (sequential), so the isolated baseline depends on power state; the time and throughput columns show it. The paper's items judged on a one-GPU proxy or an emulated configuration need that configuration's V1 to hold, or they are inconclusive; an emulated configuration's V1 row counts with the emulated preview, and a configuration another figure measured (same records) counts once."
    )
    keyed = by_key(summary)
    tput = ("matmul_tflops", "tflops_per_gpu")
    doc.table(
        [
            "figure",
            "configuration",
            "n",
            "gap",
            "95% CI",
            "V1",
            "compute ms nocomm",
            "sequential",
            "TFLOP/s nocomm",
            "sequential",
        ],  # fmt: skip
        [
            [
                r.figure,
                label(configs, r.config_id)
                + (
                    f" (same records as {same[k]})"
                    if (k := (r.figure, r.config_id)) in same
                    else ""
                ),
                "-" if pd.isna(r.n) else f"{int(r.n)}",
                pct(r.mean),
                f"[{pct(r.ci_low)}, {pct(r.ci_high)}]",
                verdict.get((r.figure, r.config_id), "not judged"),
                _cell(keyed, r.figure, r.config_id, "nocomm", "compute_ms"),
                _cell(keyed, r.figure, r.config_id, "sequential", "compute_ms"),
                _cell(keyed, r.figure, r.config_id, "nocomm", *tput),
                _cell(keyed, r.figure, r.config_id, "sequential", *tput),
            ]
            for r in v1.itertuples()
        ]
        or [["-", "-", "-", "-", "-", "not run", "-", "-", "-", "-"]],
    )


def v3_section(doc: Doc, summary: pd.DataFrame, configs: dict) -> None:
    doc.h(3, "V3: overlap fraction beside every slowdown")
    sd = summary[(summary["mode"] == "derived") & (summary["metric"] == "slowdown")]
    ov = _rows(summary, "overlap_fraction", "overlap").set_index(["figure", "config_id"])["mean"]
    doc.table(
        ["figure", "configuration", "slowdown", "overlap fraction (overlap mode)"],
        [
            [
                r.figure,
                label(configs, r.config_id),
                pct(r.mean),
                pct(ov.get((r.figure, r.config_id))),
            ]
            for r in sd.itertuples()
        ]
        or [["-", "-", "-", "-"]],
    )


def power_sampling(doc: Doc, summary: pd.DataFrame, provenance: dict) -> None:
    doc.h(2, "Power sampling")
    res = _rows(summary, "power_resolution_ms")
    if res.empty:
        doc.p(
            f"No GPU power telemetry in this run (backend: {provenance.get('power_backend', 'none')}): no power number was measured."
        )
        return
    doc.p(
        f"Backend: {provenance.get('power_backend')}. Effective refresh of the power reading, measured at run time: median {fmt(res['mean'].median())} ms (range {fmt(res['mean'].min())}-{fmt(res['mean'].max())} ms). Window means come from the cumulative energy counter; peaks from the instant power field; both also as % of the enforced power limit."
    )


def _disagreements(summary: pd.DataFrame) -> tuple[int, list[list[str]]]:
    """(modes checked, rows where the profiled span exceeds timed E2E beyond the margin)."""
    keyed = by_key(summary)["mean"]
    rows, checked = [], 0
    for (fig, cid, mode, metric), span in keyed.items():
        if metric != "profiled_span_ms" or mode not in ("overlap", "sequential", "nocomm"):
            continue
        e2e = keyed.get((fig, cid, mode, "e2e_ms"))
        if e2e is None or not e2e > 0 or not span > 0:
            continue
        checked += 1
        if span / e2e > 1 + CONSISTENCY_MARGIN:
            rows.append([fig, cid, mode, fmt(e2e), fmt(span), fmt(span / e2e)])
    return checked, rows


def unreliable_eq4(summary: pd.DataFrame) -> frozenset[str]:
    """Configurations whose overlap or sequential passes disagree: their Eq. 4 is
    unreliable (Fig. 5 hatches those bars)."""
    gpu_rows = summary[summary["gpu"].astype(str) != "cpu"]
    _, rows = _disagreements(gpu_rows)
    return frozenset(r[1] for r in rows if r[2] in ("overlap", "sequential"))


def consistency_section(doc: Doc, summary: pd.DataFrame) -> None:
    """Timed and profiled passes: Eq. 4 subtracts a profiled difference from a timed E2E."""
    doc.h(3, "Consistency of the timed and the profiled passes")
    doc.p(
        f"Each phase is timed, then profiled in a second pass. Kernels running back to back cannot take longer than the wall clock, so where the profiled pass's device span (first kernel start to last kernel end, per iteration) exceeds the timed E2E of the same mode by more than {CONSISTENCY_MARGIN:.0%}, the two passes ran in different states (power, clocks), and Eq. 4, which mixes them, is unreliable for that configuration: Fig. 5 hatches its ideal bar in red. A span well below E2E is normal: host work and gaps. The profiler's own overhead, measured by `nox -s bench` on one H200: 2.3 % of a step (docs/measurement.md)."
    )
    gpu_rows = summary[summary["gpu"].astype(str) != "cpu"]
    if gpu_rows.empty:
        doc.p(
            "Not checked on a CPU: the profiler lengthens CPU ops themselves, so the spans mean nothing there."
        )
        return
    checked, rows = _disagreements(gpu_rows)
    if not checked:
        doc.p(
            "Not checked: no profiled spans in this folder (records made before the check existed)."
        )
        return
    doc.p(
        f"{checked} mode(s) checked; {len(rows)} where the passes disagree"
        + (": Eq. 4 is unreliable there." if rows else ".")
    )
    if rows:
        doc.table(
            [
                "figure",
                "configuration",
                "mode",
                "E2E timed (ms)",
                "span profiled (ms)",
                "span / E2E",
            ],  # fmt: skip
            rows,
        )


def contention_section(
    doc: Doc, figure: str, summary: pd.DataFrame, configs: dict, fig_dir: Path
) -> list:
    """`figure`'s contention map: its heat maps and table, but for the configurations the
    mechanism and mitigation sections show."""
    from artifact.report.mechanisms import own_section_configs

    summary = summary[~summary["config_id"].isin(own_section_configs(configs))]
    png, boxed = plots.contention_figure(figure, summary, configs, fig_dir, plots.PAPER_FIG8_POINT)
    point = plots.PAPER_FIG8_POINT
    where = (
        "the paper's one Fig. 8 point is boxed"
        if boxed
        else f"the paper's one Fig. 8 point ({point['compute']} beside {plots.size(point['comm_bytes'])}) is not in this run's sweep, so nothing is boxed"
    )
    doc.p(
        "Communication size against compute kind (GEMMs by precision: compute-bound; an elementwise add: memory-bound), with the collectives spread over the compute. With one GPU the mechanisms are NCCL's one-rank kernel (SM-driven) and a copy-engine copy (bandwidth only); with several GPUs, the real all-reduce with NCCL's default CTA count and with its communicator limited to a few CTAs. Cells: mean slowdown in % over n repetitions, with the half-width of its 95% CI below it (±), red a slowdown and blue a speed-up, one colour scale per quantity; "
        + where
        + ". Compute slowdown is Eq. 1 (against the sequential baseline); 'vs nocomm' is the same against compute with no communication at all (they differ where V1 fails). The checks on this map need 5 repetitions; with fewer they are inconclusive by design."
    )
    if png is None:
        doc.p("No plot: no contention rows in this folder.")
        return []
    rows = summary[summary["figure"] == figure]
    doc.image(
        f"figures/{png.name}",
        f"Contention map, {plots.hardware(rows, configs)}: compute (top) and communication (bottom) slowdown in %",
    )
    _contention_table(doc, figure, summary, configs)
    return [png, png.with_suffix(".pdf")]


def _contention_table(doc: Doc, figure: str, summary: pd.DataFrame, configs: dict) -> None:
    keyed = by_key(summary[summary["figure"] == figure])
    ids = sorted(
        (
            c
            for c in keyed.index.unique("config_id")
            if c in configs and (figure, c, "derived", "slowdown") in keyed.index
        ),
        key=lambda c: (configs[c]["parallelism"], configs[c]["model"], configs[c]["comm_bytes"]),
    )
    doc.table(
        [
            "mechanism",
            "compute",
            "communication",
            "n",
            "compute slowdown",
            "95% CI",
            "vs nocomm",
            "comm. slowdown",
            "95% CI",
            "overlap fraction",
            "compute GB/s (overlap)",
            "comm. GB/s (overlap)",
        ],  # fmt: skip
        [
            [
                plots.PARALLELISMS.get(configs[cid]["parallelism"], configs[cid]["parallelism"]),
                configs[cid]["model"],
                plots.size(configs[cid]["comm_bytes"]),
                _n(keyed, figure, cid, "derived", "slowdown"),
                _pct_cell(keyed, figure, cid, "derived", "slowdown"),
                _pct_ci(keyed, figure, cid, "derived", "slowdown"),
                _pct_cell(keyed, figure, cid, "derived", "slowdown_vs_nocomm"),
                _pct_cell(keyed, figure, cid, "derived", "comm_slowdown"),
                _pct_ci(keyed, figure, cid, "derived", "comm_slowdown"),
                _pct_cell(keyed, figure, cid, "overlap", "overlap_fraction"),
                _cell(keyed, figure, cid, "overlap", "compute_GBps"),
                _cell(keyed, figure, cid, "overlap", "comm_algbw_GBps"),
            ]
            for cid in ids
        ],
    )


def v2_section(
    doc: Doc, figure: str, summary: pd.DataFrame, configs: dict, checks: pd.DataFrame
) -> None:
    """V2 on `figure`'s delays: the table of its delays, then compare's check rows."""
    doc.p(
        "A known delay follows every collective on the communication chain (a spin kernel on a side stream on GPUs, a sleep in the communication thread on CPUs); the collective count is the delay-free one, and the delay actually injected is read from the trace. Predictions: sequential E2E rises one for one with the delay; once communication plus delay outlasts the compute, overlapped E2E follows the communication chain; Eq. 4's ideal (derived) should not fall below the no-contention bound max(compute alone, communication alone)."
    )
    table = v2_delays(summary, configs, figure)
    doc.table(
        [
            "delay (x compute)",
            "injected (ms)",
            "E2E seq.",
            "E2E overlap",
            "compute alone",
            "comm. + delay alone",
            "Eq. 4 ideal",
            "max-ideal",
            "overlap fraction",
        ],  # fmt: skip
        [
            [
                f"{r.delay_fraction:g}",
                fmt(r.injected_delay_ms),
                fmt(r.e2e_sequential_ms),
                fmt(r.e2e_overlap_ms),
                fmt(r.e2e_compute_alone_ms),
                fmt(r.e2e_comm_alone_ms),
                fmt(r.e2e_ideal_eq4_ms),
                fmt(r.e2e_ideal_max_ms),
                fmt(r.overlap_fraction),
            ]
            for r in table.itertuples()
        ],
    )
    doc.table(
        ["check", "result", "detail"],
        [[r.item, r.verdict, r.reason] for r in checks.itertuples()],
    )


# The validations a spec declares (FigureSpec.report_sections), by kind: (heading, what
# writes it from the figure's name, the summary, configs.json and the figure's check rows)
VALIDATIONS = {"delay injection": ("V2: delay injection", v2_section)}
