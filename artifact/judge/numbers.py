"""How compare judges a number of expected/: the rows' aggregate (a mean, the largest,
a cap's increase) and its 95 % CI against the item's band (verdicts.band_verdict)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy import stats

from artifact.analyze.metrics import ratio_interval
from artifact.judge import coverage
from artifact.judge.expected import ExpectedItem
from artifact.judge.verdicts import Verdict, as_sentence, band_verdict


def fmt(x: float) -> str:
    return "nan" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.4g}"


def configurations(n: int) -> str:
    """'1 configuration', '3 configurations'."""
    return f"{n} configuration{'' if n == 1 else 's'}"


def item_verdict(
    item: ExpectedItem,
    verdict,
    reason,
    expected="",
    tolerance="",
    mean=math.nan,
    lo=math.nan,
    hi=math.nan,
) -> Verdict:
    return Verdict(
        figure=item.file_figure,
        item=item.id,
        expected=expected,
        tolerance=tolerance,
        mean=mean,
        ci_low=lo,
        ci_high=hi,
        verdict=verdict,
        reason=as_sentence(reason),
        statement=item.statement,
        metric=item.metric or item.greater_metric,
        unit="ratio" if item.aggregate == "cap_increase" else None,
        kind="derived" if item.rows.get("mode") == "derived" else "measured",
        source="; ".join(f"{k} {v}" for k, v in item.source.items()),
        item_type="number" if item.is_number else "claim",
    )


def mean_of_means(rows: pd.DataFrame) -> tuple[float, float, float]:
    """The mean of the rows' means, with a 95 % CI of that mean: each row's standard
    error recovered from its t interval, combined (the configurations are fixed, their
    errors independent), with the fewest degrees of freedom of any row (conservative).
    One row: its own CI. NaN CI where a row has none."""
    mean = float(rows["mean"].mean())
    if len(rows) == 1:
        r = rows.iloc[0]
        return mean, float(r["ci_low"]), float(r["ci_high"])
    n = rows["n"].astype(float)
    if (n < 2).any() or rows[["ci_low", "ci_high"]].isna().any().any():
        return mean, math.nan, math.nan
    t = stats.t.ppf(0.975, n - 1)
    se = ((rows["ci_high"] - rows["ci_low"]) / 2 / t).to_numpy()
    half = stats.t.ppf(0.975, n.min() - 1) * float(np.sqrt(np.sum(se**2))) / len(rows)
    return mean, mean - half, mean + half


def _aggregate(
    item: ExpectedItem, rows: pd.DataFrame, configs: dict
) -> tuple[float, float, float, str]:
    agg = item.aggregate
    covered = coverage.coverage(item, rows, configs)
    over = coverage.coverage_text(*covered, item.grid) if covered else configurations(len(rows))
    if agg == "mean":
        mean, lo, hi = mean_of_means(rows)
        return mean, lo, hi, f"the mean over {over}, with the CI of that mean"
    if agg == "max":
        mean, lo, hi = coverage.sidak_max(rows)
        top = rows.loc[rows["mean"].idxmax(), "config_id"]
        how = f"the largest over {over}: {top}"
        if len(rows) > 1:
            how += f"; the interval allows for picking the largest of {len(rows)} (Sidak)"
        return mean, lo, hi, how
    # cap_increase: E2E at the strictest cap over uncapped, same base configuration
    capped = [(configs.get(c, {}).get("power_cap_w"), c) for c in rows["config_id"]]
    base = [c for cap, c in capped if cap is None]
    strict = sorted((cap, c) for cap, c in capped if cap is not None)
    if not base or not strict:
        return math.nan, math.nan, math.nan, "needs an uncapped and a capped run"
    b = rows[rows["config_id"] == base[0]].iloc[0]
    s = rows[rows["config_id"] == strict[0][1]].iloc[0]

    def side(r) -> tuple[float, float, int]:
        return float(r["mean"]), float(r["std"]), int(r["n"])

    ratio, lo, hi = ratio_interval(side(s), side(b))
    return (
        ratio - 1,
        lo - 1,
        hi - 1,
        f"{strict[0][0]:g} W vs uncapped; the ratio's CI by the delta method, the two runs independent",
    )


def _scale(item: ExpectedItem, rows: pd.DataFrame) -> tuple[bool, str]:
    """(percent, unit): ratios (0.189) read in % and gaps in points; % of TDP as such."""
    unit = str(rows["unit"].iloc[0]) if "unit" in rows and not rows.empty else ""
    if item.aggregate == "cap_increase" or unit == "ratio":
        return True, ""
    if unit == "%" and str(item.metric or "").endswith("_pct_tdp"):
        return False, "% of TDP"
    return False, "" if unit == "nan" else unit


def judge_number(item: ExpectedItem, rows: pd.DataFrame, configs: dict) -> Verdict:
    """The equivalence rule every number shares (verdicts.band_verdict): reproduced where
    the 95 % CI lies within [expected - tol, expected + tol], not reproduced where it
    lies wholly outside, inconclusive where it reaches across an edge."""
    value, tol = float(item.value), float(item.tolerance)
    mean, lo, hi, how = _aggregate(item, rows, configs)
    band = (value - tol, value + tol)
    exp, tols = fmt(value), fmt(tol)
    if math.isnan(mean):
        return item_verdict(item, "not run", how, exp, tols)
    if math.isnan(lo) or math.isnan(hi):
        lo = hi = mean
        how += "; one repetition, so no CI: the mean is compared"
    percent, unit = _scale(item, rows)
    outcome, why = band_verdict(lo, hi, band, percent, unit)
    verdict = {"holds": "reproduced", "fails": "not reproduced"}.get(outcome, "inconclusive")
    k, suffix = (100, " %") if percent else (1, f" {unit}".rstrip())
    ci = f"[{k * lo:.4g}, {k * hi:.4g}]{suffix}"
    reason = f"The 95% CI {ci} {why.removeprefix('the CI ')} ({how})"
    return item_verdict(item, verdict, reason, exp, tols, mean, lo, hi)
