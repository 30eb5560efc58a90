"""The negative controls (docs/measurement.md, "Controls"): what Eq. 1 and the sequential
penalty read when no data moves, per configuration, judged by the checks' equivalence
rule; and the gate that keeps a claim from resting on a control that does not read 0.

A configuration's control reading is
- its zero-byte control phases (modes.CONTROL_PHASES: the overlap and sequential code
  paths with every collective on zero bytes), where its collectives move data; or
- its own Eq. 1 and penalty, where nothing moves at all (world size 1, not a proxy).
Every slowdown and penalty is then judged as the effect beyond its control (the
`*_beyond_control` rows, paired by repetition), and only where the control holds.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

import pandas as pd

from artifact.judge.verdicts import Verdict, as_sentence, equivalence
from artifact.results import is_proxy

# a control "reads 0" where its whole 95 % CI lies within +-1 point: V1's margin
CONTROL_MARGIN = 0.01
# control metric -> the quantity it controls (also its reading where nothing moves)
CONTROLLED = {"control_slowdown": "slowdown", "control_penalty": "sequential_penalty"}
# the paper's quantities and the control each rests on (Eq. 4 and its relatives are
# built from Eq. 1)
CONTROL_OF = {
    "slowdown": "control_slowdown",
    "slowdown_vs_nocomm": "control_slowdown",
    "e2e_ideal_ms": "control_slowdown",
    "e2e_above_ideal": "control_slowdown",
    "sequential_penalty": "control_penalty",
}
# the quantity judged in its place where a control was measured: the effect beyond it
BEYOND = {"slowdown": "slowdown_beyond_control", "sequential_penalty": "penalty_beyond_control"}
WHAT = {"control_slowdown": "Eq. 1 slowdown", "control_penalty": "sequential penalty"}


def _moves_nothing(row: Mapping, configs: Mapping[str, dict]) -> bool:
    config = configs.get(row["config_id"], {})
    return config.get("world_size") == 1 and not is_proxy(row.get("parallelism"))


def readings(summary: pd.DataFrame, configs: Mapping[str, dict]) -> pd.DataFrame:
    """One summary row per (figure, configuration, control metric), with a `source`
    column saying where the reading came from."""
    derived = summary[summary["mode"] == "derived"]
    out = []
    for _, rows in derived.groupby(["figure", "config_id"], sort=True):
        by_metric = {r["metric"]: r for r in rows.to_dict("records")}
        for control, own in CONTROLLED.items():
            if control in by_metric:
                row, source = by_metric[control], "the zero-byte control phases"
            elif own in by_metric and _moves_nothing(by_metric[own], configs):
                row, source = by_metric[own], "world size 1: the collectives move no data"
            else:
                continue
            out.append({**row, "metric": control, "source": source})
    return pd.DataFrame(out)


def _pct(x: float) -> str:
    return f"{100 * x:+.2f}"


def verdict_rows(summary: pd.DataFrame, configs: Mapping[str, dict]) -> list[Verdict]:
    """The controls as verdict rows (item_type "control"), one per reading."""
    out = []
    for r in readings(summary, configs).to_dict("records"):
        edges = (-CONTROL_MARGIN, CONTROL_MARGIN)
        verdict, why = equivalence(r["ci_low"], r["ci_high"], int(r["n"]), edges, percent=True)
        out.append(
            Verdict(
                figure=r["figure"],
                item=r["metric"],
                expected="0",
                tolerance=f"{CONTROL_MARGIN:g}",
                mean=r["mean"],
                ci_low=r["ci_low"],
                ci_high=r["ci_high"],
                verdict=verdict,
                reason=as_sentence(
                    f"{WHAT[r['metric']]} with no data moved ({r['source']}): "
                    f"{_pct(r['mean'])} % [{_pct(r['ci_low'])}, {_pct(r['ci_high'])}] %, n = "
                    f"{int(r['n'])}; {why}"
                ),
                n=r["n"],
                ci_method=r.get("ci_method", ""),
                statement=f"{WHAT[r['metric']]} reads 0 when no data moves",
                metric=r["metric"],
                unit="ratio",
                kind="derived",
                source="artifact: negative control",
                item_type="control",
                config_id=r["config_id"],
            )
        )
    return out


def beyond_control(rows: pd.DataFrame, summary: pd.DataFrame, metric: str) -> pd.DataFrame:
    """`rows` of `metric` with each configuration's effect beyond its control in place of
    the raw value, where a control was measured (the rows' statistics replaced)."""
    if metric not in BEYOND or rows.empty:
        return rows
    beyond = summary[(summary["mode"] == "derived") & (summary["metric"] == BEYOND[metric])]
    beyond = beyond.set_index(["figure", "config_id"])
    rows = rows.copy()
    for i, r in rows.iterrows():
        key = (r["figure"], r["config_id"])
        if key in beyond.index:
            b = beyond.loc[key]
            for col in ("mean", "std", "ci_low", "ci_high", "n", "ci_method"):
                rows.at[i, col] = b[col]
    return rows


def gate(
    verdict: Verdict, metric: str | None, rows: pd.DataFrame, controls: list[Verdict]
) -> Verdict:
    """A verdict that rests on a control which does not read 0 becomes inconclusive,
    naming the control and its interval. `controls` are verdict_rows' rows."""
    control = CONTROL_OF.get(metric or "")
    if control is None or not verdict.judged:
        return verdict
    by_key = {(c.figure, c.config_id): c for c in controls if c.item == control}
    fallback = {c.figure: c for c in controls if c.item == control}
    bad, missing = [], []
    for r in rows.to_dict("records"):
        c = by_key.get((r["figure"], r["config_id"]))
        if c is None and is_proxy(
            r.get("parallelism")
        ):  # a proxy's control: the figure's no-data row
            c = fallback.get(r["figure"])
        if c is None:
            missing.append(r["config_id"])
        elif c.verdict != "holds":
            bad.append(
                f"{r['config_id']}: {WHAT[control]} with no data moved "
                f"{_pct(c.mean)} % [{_pct(c.ci_low)}, {_pct(c.ci_high)}] % ({c.verdict})"
            )
    reason = verdict.reason.rstrip(".")
    if bad:
        return replace(
            verdict,
            verdict="inconclusive",
            reason=f"The negative control does not read 0 in {len(bad)} of {len(rows)} "
            f"configuration{'' if len(rows) == 1 else 's'}, so the effect cannot be told from "
            f"the bias: {'; '.join(bad)}. "
            f"{reason}.",
        )
    if missing:
        note = f"No negative control was measured for {', '.join(missing)}."
    else:
        note = f"Every negative control ({WHAT[control]}) reads 0."
    return replace(verdict, reason=f"{reason}. {note}")
