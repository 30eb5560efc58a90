"""The artifact's own validation checks, as verdict rows (item_type "check") that compare
writes into verdicts.csv beside the paper's items (docs/design.md section 3):

V1, per configuration: the sequential baseline's compute equals compute with no
communication at all (`v1_baseline_gap`'s whole CI within +-V1_MARGIN).

V2 (delay injection): reads the v2 experiment's rows (one configuration per delay,
artifact.experiments.v2) and tests the predictions across delays. Slopes are
least-squares fits over every repetition's (injected delay, E2E) pair
(scipy.stats.linregress), with a 95% CI from the t distribution.

Both are judged by the one equivalence rule (verdicts.equivalence) that the negative
controls also use: holds where the whole CI lies inside the band, fails where it lies
wholly outside, inconclusive otherwise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from artifact.analyze.aggregate import v2_delays
from artifact.judge.verdicts import as_sentence, equivalence
from artifact.results import Results

# V1 is an equivalence check: it holds where the gap's whole CI lies within +-1 % (smaller
# gaps are below what the paper's 25-run averages resolve, and a strict "contains 0"
# would fail gaps of 0.1 % with tight CIs), fails where the whole CI lies outside, and is
# inconclusive where the CI crosses the margin: a wide interval is no evidence of a match
V1_MARGIN = 0.01
V1_ITEM = "v1_sequential_baseline"  # V1's item name in verdicts.csv
SLOPE_TOLERANCE = 0.10  # a slope "is 1" when its CI lies within [0.9, 1.1]
CHAIN_TOLERANCE = 0.10  # overlapped E2E within 10 % of the longer chain alone


@dataclass(frozen=True)
class Check:
    name: str
    value: float
    ci_low: float
    ci_high: float
    passed: bool | None  # None: too few points to tell
    reason: str


def _slope_check(name: str, points: list[tuple[float, float]], what: str) -> Check:
    """Is the slope of y on x one? `points` are (x, y) pairs, one a repetition."""
    x, y = (np.array(v, dtype=float) for v in zip(*points, strict=True)) if points else ([], [])
    if len(x) < 3 or np.ptp(x) == 0:
        return Check(name, math.nan, math.nan, math.nan, None, f"too few points to fit {what}")
    fit = stats.linregress(x, y)
    half = stats.t.ppf(0.975, len(x) - 2) * fit.stderr
    slope, lo, hi = float(fit.slope), float(fit.slope - half), float(fit.slope + half)
    # the points are pairs of every repetition; the rule's n is the points
    outcome, why = equivalence(lo, hi, len(x), (1 - SLOPE_TOLERANCE, 1 + SLOPE_TOLERANCE))
    passed = {"holds": True, "fails": False}.get(outcome)
    verdict = {"holds": "as predicted", "fails": "not as predicted"}.get(outcome, "inconclusive")
    verdict += f" ({why})"
    return Check(
        name,
        slope,
        lo,
        hi,
        passed,
        f"{what}: slope {slope:.3f} [{lo:.3f}, {hi:.3f}] per ms of injected delay "
        f"(prediction 1, n={len(x)}); {verdict}",
    )


def _pairs(records: list[dict], config_ids: set[str], mode: str) -> list[tuple[float, float]]:
    """(injected delay, E2E) of every repetition of `mode` in these configurations (ms)."""
    return [
        (r["metrics"].get("delay_ms", 0.0), r["metrics"]["e2e_ms"])
        for r in records
        if r["config_id"] in config_ids and r["mode"] == mode
    ]


def v2_checks(table: pd.DataFrame, records: list[dict]) -> list[Check]:
    """The predictions of V2 (docs/design.md section 3), tested on `aggregate.v2_delays`'s rows
    and the same figure's records."""
    if table.empty:
        return []
    checks = [
        _slope_check(
            "sequential E2E rises by the delay",
            _pairs(records, set(table["config_id"]), "sequential"),
            "sequential E2E vs injected delay",
        )
    ]
    # where the communication chain (with its delay) outlasts the compute alone, the
    # overlapped iteration is bound by that chain
    bound = table[table["e2e_comm_alone_ms"] > table["e2e_compute_alone_ms"]]
    checks.append(
        _slope_check(
            "overlapped E2E follows the communication chain",
            _pairs(records, set(bound["config_id"]), "overlap"),
            f"overlapped E2E vs delay over the {len(bound)} communication-bound delays",
        )
    )
    last = table.iloc[-1]
    longer = max(last["e2e_compute_alone_ms"], last["e2e_comm_alone_ms"])
    gap = last["e2e_overlap_ms"] / longer - 1
    checks.append(
        Check(
            "at the largest delay, overlap reaches the longer chain",
            gap,
            math.nan,
            math.nan,
            bool(abs(gap) <= CHAIN_TOLERANCE),
            f"overlapped E2E is {100 * gap:+.1f} % off max(compute alone, communication + delay alone)"
            f" = {longer:.3g} ms (tolerance {100 * CHAIN_TOLERANCE:.0f} %)",
        )
    )
    below = table[table["e2e_ideal_eq4_ms"] < table["e2e_ideal_max_ms"]]
    checks.append(
        Check(
            "Eq. 4's ideal is not below the no-contention bound",
            float(len(below)),
            math.nan,
            math.nan,
            below.empty,
            "Eq. 4's ideal >= max(compute alone, communication alone) at every delay"
            if below.empty
            else f"Eq. 4's ideal is below max(compute alone, communication alone) at delay fraction(s) "
            f"{', '.join(f'{f:g}' for f in below['delay_fraction'])}: it credits the overlapped "
            "run with more than any schedule of the two chains could reach",
        )
    )
    return checks


def _check_row(figure: str, item: str, verdict: str, reason: str, **numbers) -> dict:
    return {
        "figure": figure,
        "item": item,
        "expected": "",
        "tolerance": "",
        "verdict": verdict,
        "reason": as_sentence(reason),
        "item_type": "check",
        "config_id": "",
        **numbers,
    }


def v1_verdicts(summary: pd.DataFrame) -> list[dict]:
    """One V1 row per configuration that measured both baselines."""
    rows = summary[(summary["mode"] == "derived") & (summary["metric"] == "v1_baseline_gap")]
    out = []
    for r in rows.itertuples():
        verdict, how = equivalence(
            r.ci_low, r.ci_high, int(r.n), (-V1_MARGIN, V1_MARGIN), percent=True
        )
        out.append(
            _check_row(
                r.figure,
                V1_ITEM,
                verdict,
                f"sequential vs nocomm compute: {100 * r.mean:+.2f} %, 95% CI "
                f"[{100 * r.ci_low:+.2f}, {100 * r.ci_high:+.2f}] %, {how}",
                mean=r.mean,
                ci_low=r.ci_low,
                ci_high=r.ci_high,
                n=r.n,
                ci_method=r.ci_method,
                config_id=r.config_id,
            )
        )
    return out


def v2_verdicts(
    summary: pd.DataFrame, configs: dict[str, dict], records: list[dict], figure: str
) -> list[dict]:
    """V2's predictions on `figure` (its records) as rows: holds, fails, or inconclusive
    (too few points, wide CI)."""
    verdict = {True: "holds", False: "fails", None: "inconclusive"}
    n = len({r["rep"] for r in records})
    return [
        _check_row(
            figure,
            c.name,
            verdict[c.passed],
            c.reason,
            mean=c.value,
            ci_low=c.ci_low,
            ci_high=c.ci_high,
            n=n,
            ci_method="t (least squares)" if not math.isnan(c.ci_low) else "",
        )
        for c in v2_checks(v2_delays(summary, configs, figure), records)
    ]


def delay_injection_verdicts(run: Results, figure: str) -> list[dict]:
    """V2's predictions where `figure` ran (fitted on its records, per repetition)."""
    if not (run.summary["figure"] == figure).any():
        return []
    return v2_verdicts(run.summary, run.configs, run.records(figure), figure)
