"""Validation V2 (delay injection) from summary.csv: the table and its checks.

Reads the v2 experiment's rows (one configuration a delay, artifact.experiments.v2) and
tests the predictions across delays. Slopes are least-squares fits over every
repetition's (injected delay, E2E) pair (scipy.stats.linregress), with a 95% CI from the
t distribution; a slope whose CI is wider than +-SLOPE_TOLERANCE * 2.5 is inconclusive.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from artifact.aggregate import by_key

SLOPE_TOLERANCE = 0.10  # a slope "is 1" when its CI meets [0.9, 1.1]
CHAIN_TOLERANCE = 0.10  # overlapped E2E within 10 % of the longer chain alone


@dataclass(frozen=True)
class Check:
    name: str
    value: float
    ci_low: float
    ci_high: float
    passed: bool | None  # None: too few points to tell
    reason: str


def v2_table(summary: pd.DataFrame, configs: dict[str, dict]) -> pd.DataFrame:
    """One row a delay: injected delay and the E2E times, measured and derived (ms)."""
    means = by_key(summary)["mean"]

    def _mean(cid: str, mode: str, metric: str) -> float:
        return float(means.get(("v2", cid, mode, metric), math.nan))

    rows = []
    ids = sorted(set(summary.loc[summary["figure"] == "v2", "config_id"]))
    for cid in ids:
        fraction = configs.get(cid, {}).get("delay_fraction", math.nan)
        delay = _mean(cid, "sequential", "delay_ms")
        rows.append(
            {
                "config_id": cid,
                "delay_fraction": fraction,
                "injected_delay_ms": 0.0 if math.isnan(delay) else delay,
                "e2e_sequential_ms": _mean(cid, "sequential", "e2e_ms"),
                "e2e_overlap_ms": _mean(cid, "overlap", "e2e_ms"),
                "compute_overlap_ms": _mean(cid, "overlap", "compute_ms"),
                "e2e_compute_alone_ms": _mean(cid, "nocomm", "e2e_ms"),
                "e2e_comm_alone_ms": _mean(cid, "comm_alone", "e2e_ms"),
                "e2e_ideal_eq4_ms": _mean(cid, "derived", "e2e_ideal_ms"),
                "e2e_ideal_max_ms": _mean(cid, "derived", "e2e_ideal_max_ms"),
                "overlap_fraction": _mean(cid, "overlap", "overlap_fraction"),
            }
        )
    if not rows:
        return pd.DataFrame()
    return pd.DataFrame(rows).sort_values("delay_fraction", ignore_index=True)


def _slope_check(name: str, points: list[tuple[float, float]], what: str) -> Check:
    """Is the slope of y on x one? `points` are (x, y) pairs, one a repetition."""
    x, y = (np.array(v, dtype=float) for v in zip(*points, strict=True)) if points else ([], [])
    if len(x) < 3 or np.ptp(x) == 0:
        return Check(name, math.nan, math.nan, math.nan, None, f"too few points to fit {what}")
    fit = stats.linregress(x, y)
    half = stats.t.ppf(0.975, len(x) - 2) * fit.stderr
    slope, lo, hi = float(fit.slope), float(fit.slope - half), float(fit.slope + half)
    if half > 2.5 * SLOPE_TOLERANCE:
        passed, verdict = None, "inconclusive (CI too wide)"
    else:
        passed = lo <= 1 + SLOPE_TOLERANCE and hi >= 1 - SLOPE_TOLERANCE
        verdict = "as predicted" if passed else "NOT as predicted"
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
        if r["figure"] == "v2" and r["config_id"] in config_ids and r["mode"] == mode
    ]


def v2_checks(table: pd.DataFrame, records: list[dict]) -> list[Check]:
    """The predictions of V2 (docs/design.md section 3), tested on `v2_table`'s rows and their records."""
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
