"""How compare judges a claim of expected/ (CLAIM_KINDS): what the rows' CIs show, the
claim, its opposite, or neither."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any

import pandas as pd

from artifact.judge.expected import ExpectedItem, as_list, select
from artifact.judge.numbers import configurations, fmt, item_verdict, mean_of_means
from artifact.judge.verdicts import Verdict


def describe_rows(filters: dict[str, Any]) -> str:
    """{'precision': 'fp32', 'model': ['a', 'b']} -> 'precision fp32, model a or b'."""
    return ", ".join(f"{k} {' or '.join(map(str, as_list(v)))}" for k, v in filters.items())


def _names(rows: pd.DataFrame) -> list[str]:
    """Config ids, with their figure where the rows span several figures."""
    if rows["figure"].nunique() <= 1:
        return list(rows["config_id"])
    return [f"{c} ({f})" for f, c in zip(rows["figure"], rows["config_id"], strict=True)]


NAN = math.nan


@dataclass(frozen=True)
class Shown:
    """What a claim's rows show. `holds` is True where the CIs show the claim, False where
    they show the opposite, None where they show neither (an interval that reaches across
    the line): "inconclusive", not "not reproduced"."""

    holds: bool | None
    reason: str
    expected: str
    mean: float = NAN
    lo: float = NAN
    hi: float = NAN


@dataclass(frozen=True)
class Unjudged:
    """Why a claim cannot be judged on these rows: its verdict is "not run"."""

    reason: str


Judged = Shown | Unjudged


def _bounds(rows: pd.DataFrame) -> tuple[pd.Series, pd.Series]:
    """Each row's CI; a row without one (one repetition) is its mean."""
    return rows["ci_low"].fillna(rows["mean"]), rows["ci_high"].fillna(rows["mean"])


def _every_row_positive(item: ExpectedItem, rows: pd.DataFrame, summary, configs) -> Judged:
    lo, hi = _bounds(rows)
    below, across = rows[hi <= 0], rows[(lo <= 0) & (hi > 0)]
    if below.empty and across.empty:
        every = (
            "the one configuration measured"
            if len(rows) == 1
            else f"all {len(rows)} configurations measured"
        )
        holds, reason = True, f"The CI is above 0 in {every}"
    elif not below.empty:
        holds = False
        reason = f"At or below 0 in {len(below)} of {configurations(len(rows))}: {', '.join(_names(below))}"
    else:
        holds = None
        where = (
            "the one configuration measured"
            if len(rows) == 1
            else f"{len(across)} of {configurations(len(rows))}"
        )
        reason = (
            f"The CI reaches across 0 in {where}, "
            f"so the data show neither a rise nor its absence: {', '.join(_names(across))}"
        )
    return Shown(holds, reason, "> 0", *mean_of_means(rows))


def _group_greater(item: ExpectedItem, rows: pd.DataFrame, summary, configs) -> Judged:
    a, b = select(rows, item.greater, None), select(rows, item.lesser, None)
    greater, lesser = describe_rows(item.greater), describe_rows(item.lesser)
    if a.empty or b.empty:
        return Unjudged(f"It needs rows for both {greater} and {lesser}.")
    # each group's mean over its configurations, with the CI of that mean
    (a_mean, a_lo, a_hi), (b_mean, b_lo, b_hi) = mean_of_means(a), mean_of_means(b)
    if a_lo > b_hi:
        holds, tail = True, ""
    elif a_hi < b_lo:
        holds, tail = False, "; the other way round"
    else:
        holds = None
        tail = "; the CIs overlap" + (
            ", ordered as claimed" if a_mean > b_mean else ", ordered the other way"
        )
    reason = (
        f"{greater}: {fmt(a_mean)} [{fmt(a_lo)}, {fmt(a_hi)}] vs "
        f"{lesser}: {fmt(b_mean)} [{fmt(b_lo)}, {fmt(b_hi)}]" + tail
    )
    return Shown(holds, reason, f"{greater} above {lesser}", a["mean"].mean() - b["mean"].mean())


def _metric_greater(item: ExpectedItem, rows, summary: pd.DataFrame, configs) -> Judged:
    greater, lesser = item.greater_metric, item.lesser_metric
    g = select(summary, item.rows, greater).set_index(["figure", "config_id"])
    lsr = select(summary, item.rows, lesser).set_index(["figure", "config_id"])
    common = g.index.intersection(lsr.index)
    if common.empty:
        return Unjudged(f"no rows with both {greater} and {lesser}")
    (g_lo, g_hi), (l_lo, l_hi) = _bounds(g.loc[common]), _bounds(lsr.loc[common])
    above, below = g_lo > l_hi, g_hi < l_lo

    def names(mask: pd.Series) -> str:
        return ", ".join(f"{c[1]} ({c[0]})" for c in common[mask.to_numpy()])

    if above.all():
        every = "the one configuration" if len(common) == 1 else f"all {len(common)} configurations"
        holds, reason = True, f"{greater} is above {lesser} in {every}"
    elif below.any():
        holds, reason = False, f"{greater} is below {lesser} in: {names(below)}"
    else:
        holds = None
        reason = f"the CIs of {greater} and {lesser} overlap in: {names(~above)}"
    gap = float((g.loc[common, "mean"] - lsr.loc[common, "mean"]).mean())
    return Shown(holds, reason, f"{greater} above {lesser}", gap)


def _monotone(item: ExpectedItem, rows: pd.DataFrame, summary, configs: dict) -> Judged:
    """increases_with / decreases_with a configuration field: each step along it, from one
    value's CI to the next one's (the rows in the field's order)."""
    along = item.along
    lo, hi = _bounds(rows)
    pts = sorted(
        (configs.get(c, {}).get(along), m, a, b)
        for c, m, a, b in zip(rows["config_id"], rows["mean"], lo, hi, strict=True)
        if configs.get(c, {}).get(along) is not None
    )
    if len({p[0] for p in pts}) < 2:
        return Unjudged(f"needs configurations with at least two values of {along}")
    rising = item.kind == "increases_with"
    steps = []  # True: the step goes the claimed way, False: the other way, None: unclear
    for (_, _, lo0, hi0), (_, _, lo1, hi1) in itertools.pairwise(pts):
        up, down = lo1 > hi0, hi1 < lo0
        claimed, opposite = (up, down) if rising else (down, up)
        steps.append(True if claimed else False if opposite else None)
    holds = True if all(s is True for s in steps) else False if False in steps else None
    reason = f"{along} -> mean [95% CI]: " + ", ".join(
        f"{x:g}: {fmt(m)} [{fmt(a)}, {fmt(b)}]" for x, m, a, b in pts
    )
    if holds is None:
        reason += "; neighbouring CIs overlap, so the trend is not shown either way"
    return Shown(holds, reason, item.kind.replace("_", " ") + f" {along}")


# the claims that compare configurations with one another
ACROSS_CONFIGS = {"group_greater", "increases_with", "decreases_with"}

CLAIM_JUDGES = {
    "every_row_positive": _every_row_positive,
    "group_greater": _group_greater,
    "metric_greater": _metric_greater,
    "increases_with": _monotone,
    "decreases_with": _monotone,
}


def judge_claim(
    item: ExpectedItem, rows: pd.DataFrame, summary: pd.DataFrame, configs: dict
) -> Verdict:
    judged = CLAIM_JUDGES[item.kind](item, rows, summary, configs)
    if isinstance(judged, Unjudged):
        return item_verdict(item, "not run", judged.reason)
    verdict = {True: "reproduced", False: "not reproduced", None: "inconclusive"}[judged.holds]
    return item_verdict(
        item, verdict, judged.reason, judged.expected, "", judged.mean, judged.lo, judged.hi
    )
