"""summary.csv + expected/ -> verdicts.csv (docs/design.md section 4).

Each expected item is a *number* (a value with a tolerance band, compared through the
95 % CI of the matching rows) or a *claim* (a testable statement). Verdicts:
    reproduced      the whole CI lies within the band / the CIs show the claim
    not reproduced  the CI lies wholly outside the band / the CIs show the opposite
                    (the reason says by how much or where)
    inconclusive    too few repetitions, a slowdown within its noise floor, a negative
                    control that does not read 0, a precondition the run does not meet
                    (fig7: blocks the power sampler resolves), a CI that reaches across
                    an edge of the band or CIs across the claim's line (they show
                    neither), an item about the paper's whole grid on part of it, or a
                    proxy's or emulated configuration's V1 that does not hold
    not applicable  the item's hardware is absent here (e.g. MI250 numbers on an H200),
                    or the run is a CPU functional check, which evaluates no claim
    not run         the rows it needs are not in this folder (an opt-in figure, or one
                    that did not run; the figure's status file says why). On a CPU: a
                    figure it needs did not run; where they all ran, it is "not applicable"
Numbers from other hardware than the paper's are compared only through hardware-free
quantities (slowdown, penalty, % of TDP): absolute times are never in expected/.

Items are judged per configuration and never average mechanisms: the rows of one-GPU
proxies are left out of the paper's items and judged apart, one row per proxy
configuration (item_type "proxy", never in the paper's tally). Every slowdown and
penalty is judged as the effect beyond its negative control (artifact/judge/controls.py).
An interval shown beside a mean is a 95 % CI of that mean.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from pathlib import Path

import pandas as pd

from artifact.analyze import noise
from artifact.figures import with_check
from artifact.judge import controls, copies, coverage, rehearsal, scope, standin, validation
from artifact.judge.claims import ACROSS_CONFIGS, judge_claim
from artifact.judge.expected import (
    EXPECTED_DIR,
    NEEDS_COMMUNICATION,
    ExpectedItem,
    for_gpus,
    load_expected,
    metric_of,
    select,
)
from artifact.judge.figure_status import CPU_REASON, figure_status, not_ran, on_a_cpu
from artifact.judge.numbers import fmt, item_verdict, judge_number
from artifact.judge.verdicts import (
    MIN_REPETITIONS,
    Verdict,
    as_sentence,
    counted_in,
    table,
)
from artifact.results import Results
from artifact.store import RunStore

CHECK_CPU_REASON = "CPU functional check: the check ran, its numbers are not judged on a CPU."
NO_COMMUNICATION_REASON = (
    "No collective between GPUs ran beside compute in these configurations (world size 1), "
    "so there is no overlap to judge"
)
PROXY_NOTE = "the one-GPU proxies' numbers are under proxy evidence"
PREVIEW_NOTE = "emulated rows (--emulate-world) are shown as a preview, never counted"
# what an emulated number cannot show (the report's fidelity paragraph says more)
EMULATED_LIMITS = "no real NVLink or NCCL protocol, no peers' load, no pipeline bubble"


def _stand_in_verdicts(run: Results, figure: str) -> list[dict]:
    return standin.verdict_rows(run.summary, run.configs, figure)


# compare's own checks of one figure's rows, by the kind its spec declares
# (FigureSpec.checks); verdicts.csv lists them in this order, after V1
CHECKS = {
    "delay injection": validation.delay_injection_verdicts,
    "stand-in matches co-located NCCL": _stand_in_verdicts,
}


def declared_checks(run: Results) -> list[Verdict]:
    """Every check a figure's spec declares, kind by kind, each declaring figure in turn."""
    return [
        Verdict.of(row)
        for kind, check in CHECKS.items()
        for fig in with_check(kind)
        for row in check(run, fig)
    ]


# --- selecting rows ---------------------------------------------------------------------


def with_communication(summary: pd.DataFrame) -> set[tuple[str, str]]:
    """(figure, config id) of the configurations whose overlap mode ran communication
    kernels: the collective itself, or the stand-in a one-GPU proxy runs (comm_role_ms)."""
    ov = summary[summary["mode"] == "overlap"]
    role = ov[ov["metric"] == "comm_role_ms"]
    comm = ov[ov["metric"] == "communication_ms"]
    keyed = {(r.figure, r.config_id): r.mean for r in comm.itertuples()}
    keyed |= {(r.figure, r.config_id): r.mean for r in role.itertuples()}
    return {k for k, v in keyed.items() if v > 0}


def _unjudgeable(item: ExpectedItem, run: Results) -> str | None:
    """Why the item is "not applicable" to this run before any row is read."""
    if not run.gpus:
        return CPU_REASON
    if not for_gpus(item, run.gpus):
        return (
            f"the paper's item is for {', '.join(item.scope)}; this run has {', '.join(run.gpus)}"
        )
    return None


def _rows_with_communication(
    item: ExpectedItem, rows: pd.DataFrame, run: Results
) -> pd.DataFrame | None:
    """The rows whose configuration ran communication beside compute; None where the
    item's configurations ran none at all (world size 1: nothing to judge)."""
    ran = with_communication(run.summary)
    # the configurations the item is about, whatever metrics they have: without
    # communication the overlap fraction has no rows at all (it is undefined)
    about = select(run.paper_rows, {k: v for k, v in item.rows.items() if k != "mode"}, None)
    keys = set(zip(about["figure"], about["config_id"], strict=True))
    rows = rows[[k in ran for k in zip(rows["figure"], rows["config_id"], strict=True)]]
    return None if rows.empty and keys and not keys & ran else rows


def _precondition(item: ExpectedItem, rows: pd.DataFrame, summary: pd.DataFrame) -> str | None:
    """Why an item whose expected entry `requires` {metric, at_least} cannot be judged on
    these rows' configurations (fig7: blocks several refreshes of the power sampler long)."""
    need = item.requires
    if not need:
        return None
    keys = set(zip(rows["figure"], rows["config_id"], strict=True))
    have = summary[summary["metric"] == need["metric"]]
    short = [
        f"{r.config_id}: {r.mean:.3g}"
        for r in have.itertuples()
        if (r.figure, r.config_id) in keys and not r.mean >= need["at_least"]
    ]
    if not short:
        return None
    return f"{need['why']} ({need['metric']} below {need['at_least']:g} in {'; '.join(short)})"


def _with_evidence(
    v: Verdict, item, rows: pd.DataFrame, run: Results, checks: list[Verdict]
) -> Verdict:
    """n and the CI method of the rows judged; too few repetitions, slowdowns within their
    A/A noise floor (artifact/analyze/noise.py), a negative control that does not read 0
    (artifact/judge/controls.py) or an unmet precondition make it inconclusive."""
    n = int(rows["n"].min())
    v = replace(v, n=n)
    if "ci_method" in rows:
        v = replace(v, ci_method="; ".join(sorted(set(rows["ci_method"].dropna().astype(str)))))
    if v.judged and n < MIN_REPETITIONS:
        why = f"Too few repetitions to judge (n = {n}; a verdict needs {MIN_REPETITIONS}): "
        v = replace(v, verdict="inconclusive", reason=why + v.reason)
    v = _coverage_gate(v, item, rows, run)
    v = noise.gate(v, item, rows, run.summary)
    v = controls.gate(v, item.metric, rows, checks)
    if v.judged and (why := _precondition(item, rows, run.summary)):
        v = replace(v, verdict="inconclusive", reason=as_sentence(f"{why}. {v.reason}"))
    return v


def _coverage_gate(v: Verdict, item, rows: pd.DataFrame, run: Results) -> Verdict:
    """An item about the paper's whole grid (expected/'s `grid`) is judged only on all of
    it: on part, its mean or maximum says nothing of the rest (artifact/judge/coverage.py)."""
    covered = coverage.coverage(item, rows, run.configs)
    if covered is None or not v.judged:
        return v
    k, big_k = covered
    if k >= big_k:
        return v
    return replace(
        v,
        verdict="inconclusive",
        reason=as_sentence(
            f"The run covers {coverage.coverage_text(k, big_k, item.grid)}; the item "
            f"speaks of all {big_k}, so it is judged only where all ran "
            f"(on these it would read {v.verdict}). {v.reason}"
        ),
    )


@dataclass(frozen=True)
class V1Rows:
    """V1's rows by (figure whose records, config id): a copy's V1 is its source's."""

    by_reading: dict[tuple[str, str], Verdict] = field(default_factory=dict)
    copied: dict[tuple[str, str], str] = field(default_factory=dict)

    @classmethod
    def of(cls, v1_rows: list[Verdict], copied: dict) -> V1Rows:
        by_reading: dict = {}
        for r in v1_rows:
            by_reading.setdefault((copies.root(r.figure, r.config_id, copied), r.config_id), r)
        return cls(by_reading, copied)

    def get(self, figure: str, config_id: str) -> Verdict | None:
        return self.by_reading.get((copies.root(figure, config_id, self.copied), config_id))


def _v1_gate(v: Verdict, config_ids: list[str], figure: str, v1: V1Rows) -> Verdict:
    """A proxy's or an emulated configuration's verdict needs its V1 to hold: its
    sequential baseline must be the compute of nocomm, or Eq. 1 measures the stand-in's
    own bias (one GPU's proxies: V1 fails by 8 to 14 % on an H200)."""
    if not v.judged:
        return v
    bad = []
    for c in config_ids:
        row = v1.get(figure, c)
        if row is None:
            bad.append(f"V1 was not measured for {c}")
        elif row.verdict != "holds":
            what = (
                f"fails by {100 * abs(float(row.mean)):.1f} %"
                if row.verdict == "fails"
                else "is inconclusive"
            )
            bad.append(f"V1 {what} for {c} ({row.reason[0].lower()}{row.reason[1:].rstrip('.')})")
    if not bad:
        return v
    return replace(
        v,
        verdict="inconclusive",
        reason=as_sentence(
            f"{'; '.join(bad)}: the sequential baseline is not shown to be the compute "
            f"alone, so the item cannot be read on it (it would read {v.verdict}). "
            f"{v.reason}"
        ),
    )


def _not_ran(figures: list[str], run: Results) -> str:
    """Why those of the figures that did not run did not ('' if all ran), as the
    report's "What ran" says it (artifact.judge.figure_status)."""
    return not_ran(figures, lambda f: figure_status(f, run.status, run.summary))


def _judge_rows(
    item: ExpectedItem, rows: pd.DataFrame, run: Results, checks: list[Verdict]
) -> Verdict:
    """One verdict on `rows` (the paper's rows, or one proxy configuration's)."""
    metric = metric_of(item)
    is_number = item.is_number
    rows = controls.beyond_control(rows, run.summary, metric)
    v = (
        judge_number(item, rows, run.configs)
        if is_number
        else judge_claim(item, rows, run.summary, run.configs)
    )
    if v.verdict == "not run":
        return v
    return _with_evidence(v, item, rows, run, checks)


def judge_item(
    item: ExpectedItem, run: Results, checks: list[Verdict] | None = None, v1: V1Rows | None = None
) -> list[Verdict]:
    """One expected item's verdict row, then one row per proxy configuration it has rows
    of (proxy evidence), then the preview's rows (emulated configurations). `checks` are
    the negative controls' rows, `v1` V1's (computed here if not given)."""
    checks = checks or []
    if v1 is None:
        v1_rows = [Verdict.of(r) for r in validation.v1_verdicts(run.summary)]
        v1 = V1Rows.of(v1_rows, copies.sources(run.summary))
    paper = _paper_verdicts(item, run, checks, v1)
    previews = _preview_verdicts(item, run, checks, v1)
    if previews and paper[0].verdict == "not run":
        reason = as_sentence(f"{paper[0].reason.rstrip('.')}; {PREVIEW_NOTE}")
        paper[0] = replace(paper[0], reason=reason)
    return paper + previews


def _preview_verdicts(
    item: ExpectedItem, run: Results, checks: list[Verdict], v1: V1Rows
) -> list[Verdict]:
    """The item judged on emulated rows (GPU runs only: a CPU run judges nothing),
    labelled a preview and never counted: a number on each configuration alone, a claim
    across configurations on those emulated at one W together."""
    if not run.gpus or run.preview_rows.empty or _unjudgeable(item, run):
        return []
    is_number = item.is_number
    selected = select(run.preview_rows, item.rows, metric_of(item))
    ids = sorted(set(selected["config_id"]))
    if not is_number and item.kind in ACROSS_CONFIGS:
        # a claim across configurations (FP16 beside FP32, a trend in size): judged on
        # all the configurations emulated at one W together
        worlds = {c: run.emulated_world(c) for c in ids}
        groups = [[c for c in ids if worlds[c] == w] for w in dict.fromkeys(worlds.values())]
    else:
        groups = [[c] for c in ids]
    out = []
    for group in groups:
        rows = selected[selected["config_id"].isin(group)]
        v = _judge_rows(item, rows, run, checks)
        if v.verdict != "not run":
            v = _v1_gate(v, group, str(rows["figure"].iloc[0]), v1)
        note = (
            copies.without_copy_note(run.configs.get(group[0], {}).get("note", ""))
            or EMULATED_LIMITS
        )
        reason = as_sentence(f"{v.reason.rstrip('.')}. Emulated preview, not counted: {note}")
        out.append(replace(v, reason=reason, item_type="preview", config_id="; ".join(group)))
    return out


def _paper_verdicts(
    item: ExpectedItem, run: Results, checks: list[Verdict], v1: V1Rows
) -> list[Verdict]:
    """The item's verdict on the paper's rows, then its proxy evidence."""
    is_number = item.is_number
    exp = (fmt(item.value), fmt(item.tolerance)) if is_number else ("", "")
    figures = item.figures
    if not run.gpus:  # the plan's answer too (figure_status.on_a_cpu)
        return [item_verdict(item, *on_a_cpu(item, lambda f: figure_status(f, run.status, run.summary)), *exp)]  # fmt: skip
    why = _unjudgeable(item, run)
    if why:
        return [item_verdict(item, "not applicable", why, *exp)]
    metric = metric_of(item)
    selected = select(run.judged_rows, item.rows, metric)
    proxies = [c for c in run.proxy_configs if c in set(selected["config_id"])]
    evidence = [_proxy_verdict(item, selected, c, run, checks, v1) for c in proxies]
    if (beyond := scope.out_of_scope(item, run)) is not None:  # rows that cannot speak to it
        note = f"; {PROXY_NOTE}" if evidence else ""
        return [item_verdict(item, beyond[0], beyond[1] + note, *exp), *evidence]
    rows = select(run.paper_rows, item.rows, metric)
    if metric in NEEDS_COMMUNICATION:
        rows = _rows_with_communication(item, rows, run)
        if rows is None:
            note = f"; {PROXY_NOTE}" if evidence else ""
            return [
                item_verdict(item, "not applicable", NO_COMMUNICATION_REASON + note, *exp),
                *evidence,
            ]
    if rows.empty:
        reason = (
            _not_ran(figures, run)
            or scope.missing_configuration(item, run)
            or f"no {metric} rows for {', '.join(figures)} in this folder"
        )
        return [item_verdict(item, "not run", reason, *exp), *evidence]
    return [_judge_rows(item, rows, run, checks), *evidence]


def _proxy_verdict(
    item: ExpectedItem, selected: pd.DataFrame, config_id: str, run: Results, checks, v1: V1Rows
) -> Verdict:
    """The item judged on one proxy configuration's rows alone (never averaged with
    another mechanism), labelled proxy evidence; it needs the configuration's V1 to hold."""
    rows = selected[selected["config_id"] == config_id]
    v = _judge_rows(item, rows, run, checks)
    if v.verdict != "not run":
        v = _v1_gate(v, [config_id], str(rows["figure"].iloc[0]), v1)
    note = copies.without_copy_note(run.configs.get(config_id, {}).get("note", ""))
    reason = as_sentence(f"{v.reason.rstrip('.')}. Proxy evidence, not counted: {note}")
    return replace(v, reason=reason, item_type="proxy", config_id=config_id)


def compare(out: Path, expected_dir: Path = EXPECTED_DIR) -> pd.DataFrame:
    """The negative controls, every expected item's verdict (with its proxy evidence),
    then the artifact's own checks (V1, V2); each row says the tally it counts in."""
    items = load_expected(expected_dir)
    run = Results.load(out)
    copied = copies.sources(run.summary)
    control_rows = controls.verdict_rows(run.judged_rows, run.configs)
    # the emulated configurations' controls: a preview too, judged by the same rule
    preview_controls = [
        replace(c, item_type="preview")
        for c in controls.verdict_rows(run.preview_rows, run.configs)
    ]
    control_rows += preview_controls
    if not run.gpus:  # a CPU run checks the code path; its numbers judge nothing
        control_rows = [_not_judged_on_a_cpu(c) for c in control_rows]
    checks = [Verdict.of(c) for c in validation.v1_verdicts(run.summary)]
    v1 = V1Rows.of(checks, copied)
    rows_out = [row for item in items for row in judge_item(item, run, control_rows, v1)]
    checks += declared_checks(run)
    if not run.gpus:
        checks = [_not_judged_on_a_cpu(c) for c in checks]
    if run.rehearsal:  # nothing is judged but whether the path works
        why = rehearsal_reason(run)
        control_rows, rows_out, checks = (
            [_unjudged(r, why) for r in rows] for rows in (control_rows, rows_out, checks)
        )
        checks += rehearsal.check_rows(*rehearsal.load(out))
    every = _count_once(control_rows + rows_out + checks, copied, set(run.emulated_configs))
    verdicts = table(every)
    summary = run.summary
    units = summary.groupby("metric")["unit"].first() if "unit" in summary else {}  # rows' unit
    # object first: a column of no unit at all reads as float, which text cannot fill
    unit = verdicts["unit"].astype(object)
    verdicts["unit"] = unit.fillna(verdicts["metric"].map(units).astype(object)).fillna("")
    return verdicts


# the item types whose rows are readings of the paper's items on rows not the paper's
READING_KINDS = ("proxy", "preview")


def rehearsal_reason(run: Results) -> str:
    """Why a rehearsal judges no item of the paper, nor its controls and checks."""
    k = run.ranks_per_gpu
    where = (
        f"{k} ranks shared each GPU"
        if k > 1 and run.gpus
        else ("one rank a GPU" if run.gpus else "gloo processes on a CPU")
    )
    return (
        f"a dress rehearsal ({where}, tiny models, the fewest steps): no number here "
        "measures the paper's quantities; it checks only that the path runs (see the "
        "rehearsal's functional checks)"
    )


def _not_judged_on_a_cpu(row: Verdict) -> Verdict:
    return replace(row, verdict="not applicable", reason=CHECK_CPU_REASON)


def _unjudged(row: Verdict, why: str) -> Verdict:
    nan = math.nan
    return replace(
        row, verdict="not applicable", reason=as_sentence(why), mean=nan, ci_low=nan, ci_high=nan
    )


def _count_once(rows: list[Verdict], copied: dict, emulated: set[str]) -> list[Verdict]:
    """Each row's tally (verdicts.counted_in; a check or control of an emulated
    configuration counts with the preview) and, for a configuration whose records another
    figure measured, `same_records_as`: the row counts once, under the figure that
    measured it (or the first figure listed where that one has no such row)."""
    first: dict[tuple, str] = {}
    judged: dict[tuple, str] = {}  # a proxy's or preview's reading -> the item that counted it
    out = []
    for row in rows:
        config = str(row.config_id or "")
        source = copied.get((row.figure, config), "")
        tally = counted_in(row.item_type, config in emulated)
        root = copies.root(row.figure, config, copied)
        if row.item_type in READING_KINDS and config:
            # items of the paper judged on one-GPU or emulated rows: a reading is the
            # records and the metric, and two items that read the same count it once
            # (the configuration names the records whichever figure's file the item is in;
            # a copy of them under another figure has the same id)
            owner = judged.setdefault((tally, str(row.metric), config), row.item)
            if owner != row.item:
                why = f"{row.reason.rstrip('.')} (the same reading as {owner}: counted there)"
                out.append(replace(row, reason=as_sentence(why), counted_in="", same_records_as=""))
                continue
        reading = (tally, row.item, config, root)
        if config and row.item_type not in ("number", "claim"):
            # the figure that measured it counts first, then any copy in the order given
            owner = first.setdefault(reading, root if _has(rows, reading) else row.figure)
            if owner != row.figure:
                tally = ""
        same = copies.label(source) if source else ""
        if same:
            row = replace(
                row, reason=as_sentence(f"{row.reason.rstrip('.')} (same records as {same})")
            )
        out.append(replace(row, counted_in=tally, same_records_as=same))
    return out


def _has(rows: list[Verdict], reading: tuple) -> bool:
    """Whether the figure that measured a reading has a row of it among `rows`."""
    _, item, config, owner = reading
    return any(
        r.figure == owner and r.item == item and str(r.config_id or "") == config for r in rows
    )


def write_verdicts(out: Path, expected_dir: Path = EXPECTED_DIR) -> pd.DataFrame:
    verdicts = compare(out, expected_dir)
    RunStore(out).write_text("verdicts.csv", verdicts.to_csv(index=False))
    return verdicts
