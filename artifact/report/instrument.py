"""The report's sections on the instrument itself: the negative controls (shown before any
verdict), proxy evidence (the paper's items judged on one-GPU proxies, never counted),
and how the timed passes went (settling, outlying iterations). Reads verdicts.csv and
summary.csv only (docs/measurement.md, "The protocol" and "Controls")."""

from __future__ import annotations

import math
import re

import pandas as pd

from artifact.judge.controls import WHAT
from artifact.judge.verdicts import MIN_REPETITIONS, counted, of_type
from artifact.report.appendix import measured_text
from artifact.report.document import Doc

CONTROLS_TEXT = (
    "A negative control is a measurement whose true value is 0: Eq. 1's slowdown and the "
    "sequential penalty when no data moves. Where the collectives move data (several GPUs, "
    "or an emulated world), each configuration runs two more phases for it, the zero-byte "
    "controls: the overlap and sequential code paths with every collective on empty "
    "buffers. On one GPU a collective moves no data anyway, so no extra phase runs: the "
    "configuration's own slowdown and penalty are its control. A control holds where its "
    "whole 95 % CI lies within ±1 point, fails where it lies wholly outside, and is "
    f"inconclusive otherwise, or with fewer than {MIN_REPETITIONS} repetitions (the n "
    "column); a claim that rests on a control that does not hold is inconclusive, and "
    "every slowdown and penalty with a measured control is judged as the effect beyond it."
)
PROXY_TEXT = (
    "With one GPU an all-reduce moves no data, so the microbenchmark also runs labelled "
    "proxies (NCCL's one-rank reduction kernel, a device-to-device copy). Below, the "
    "paper's items judged on each proxy configuration alone: evidence about the mechanism, "
    "not a reproduction. None of these rows counts in the paper's tally."
)


def _pct(x: float) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:+.2f} %"


def controls_section(doc: Doc, verdicts: pd.DataFrame) -> None:
    controls = of_type(verdicts, "control")
    doc.h(1, "Negative controls")
    doc.p(CONTROLS_TEXT)
    if controls.empty:
        previews = of_type(verdicts, "preview")
        if previews["item"].str.startswith("control_").any():
            doc.p("Every configuration here is emulated (--emulate-world): its zero-byte controls are in the section 'Emulated W-GPU preview (one GPU)'.")  # fmt: skip
        else:
            doc.p("No control was measured in this folder (records made before the controls existed).")  # fmt: skip
        return
    counts = controls["verdict"].value_counts()
    if set(counts.index) == {"not applicable"}:  # a CPU run: 36 rows that all say so
        # a row shared with another figure says so in its reason: one reason, said once
        said = (
            re.sub(r" \(same records as [^)]*\)$", "", r.rstrip(".")) for r in controls["reason"]
        )
        reasons = "; ".join(dict.fromkeys(said))
        doc.p(
            f"All {len(controls)} controls are not applicable here: {reasons}. "
            "Their readings are in verdicts.csv (item_type control)."
        )
        return
    doc.p(readings_sentence(controls, "control"))
    doc.table(
        ["figure", "configuration", "control", "mean [95% CI]", "n", "verdict"],
        [
            [r.figure, with_source(r), WHAT[r.item],
             f"{_pct(r.mean)} [{_pct(r.ci_low)}, {_pct(r.ci_high)}]", f"{int(r.n)}", r.verdict]
            for r in controls.itertuples()
        ],
    )  # fmt: skip


def with_source(r) -> str:
    """A configuration, with the figure whose records it holds where another measured it."""
    same = str(getattr(r, "same_records_as", "") or "")
    return f"{r.config_id} (same records as {same})" if same else str(r.config_id)


def readings_sentence(rows: pd.DataFrame, tally_name: str) -> str:
    """'12 readings: 9 hold, 3 inconclusive.' Each reading once: a configuration copied
    from another figure is listed under both and counted under the one that measured it."""
    once = counted(rows, tally_name)
    counts = once["verdict"].value_counts()
    words = {"holds": "hold", "fails": "fail"}
    text = f"{len(once)} reading{'' if len(once) == 1 else 's'}: " + ", ".join(
        f"{n} {words.get(v, v) if len(once) != 1 else v}" for v, n in counts.items()
    )
    copies = len(rows) - len(once)
    if copies:
        text += (
            f" ({len(rows)} rows: {copies} repeat a reading another figure measured, marked "
            "'same records as', and count once)"
        )
    return text + "."


def proxy_section(doc: Doc, verdicts: pd.DataFrame) -> None:
    proxies = of_type(verdicts, "proxy")
    if proxies.empty:
        return
    doc.h(2, "Proxy evidence (one GPU; not counted)")
    doc.p(PROXY_TEXT)
    doc.table(
        ["figure", "statement", "proxy configuration", "this run: mean [95% CI]", "n", "verdict", "why"],
        [
            [r.figure, r.statement, r.config_id, measured_text(r),
             "-" if pd.isna(r.n) else f"{int(r.n)}", r.verdict, r.reason]
            for r in proxies.itertuples()
        ],
    )  # fmt: skip


def _per_config(summary: pd.DataFrame, metric: str) -> pd.DataFrame:
    rows = summary[(summary["metric"] == metric) & (summary["mode"] != "derived")]
    return rows.groupby(["figure", "config_id"])["mean"]


def passes_section(doc: Doc, summary: pd.DataFrame) -> None:
    """How the timed passes went: settling and outlying iterations, per configuration."""
    doc.h(3, "Timed passes: settling and outlying iterations")
    doc.p(
        "Before timed iterations the GPU settles: the work about to be timed runs until the "
        "last three step times and SM clocks agree within 5 %, within the preset's bounds. "
        "Training times its phases in interleaved rounds (every phase once a round, so a "
        "slow spell of the host falls on all alike; settling is then by rounds; more rounds "
        "while a phase's median is less precise than the preset asks) and takes a "
        "phase's round-adjusted median; the microbenchmarks time each phase in a pass of its "
        "own and take its median iteration. An iteration more than 5 scaled MADs (and 5 %) "
        "from it is an outlier, counted here and left in the records (`e2e_iterations_ms`)."
    )
    if "settled" not in set(summary["metric"]):
        doc.p("Not recorded in this folder (records made before settling existed).")
        return
    settled = _per_config(summary, "settled").mean()
    outliers = _per_config(summary, "e2e_outliers").sum()
    iters = _per_config(summary, "timed_iters").mean()
    settle_s = _per_config(summary, "settle_s").mean()
    rows = [
        [fig, cid, f"{100 * settled[(fig, cid)]:.0f} %", f"{settle_s[(fig, cid)]:.2f}",
         f"{iters[(fig, cid)]:.0f}", f"{outliers.get((fig, cid), 0):.1f}"]
        for fig, cid in settled.index
    ]  # fmt: skip
    flagged = sum(1 for r in rows if float(r[5]) > 0)
    doc.p(
        f"{flagged} of {len(rows)} configurations had outlying iterations (mean count per "
        "repetition, summed over phases)."
    )
    doc.table(
        ["figure", "configuration", "phases settled", "settle (s)", "timed iterations",
         "outliers per repetition"],
        rows,
    )  # fmt: skip
