"""Eq. 1's noise floor, the A/A check, and the judgement it allows (docs/measurement.md,
"Noise floor").

Every repetition of a figure that reports Eq. 1 also runs its overlap phase a second
time (`overlap_repeat`, artifact.rank.modes). Eq. 1 between those two identical passes is
`noise_floor` in summary.csv (mode `derived`, figures.derived.MODE_DERIVED): what the slowdown
reads when nothing differs between the passes compared. A slowdown is evidence of
contention only where its 95 % CI lies beyond the largest A/A reading the floor's own
CI allows (`threshold`); `judge` says so for one configuration, and `gate` is compare's
hook for the claims that overlap slows compute. The floor sees noise between passes of
one code path; a bias tied to a mode is the negative controls' business
(artifact/judge/controls.py).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace

import pandas as pd

from artifact.judge.expected import ExpectedItem
from artifact.judge.verdicts import Verdict

# Eq. 1's name in every figure's summary rows (artifact/figures/derived.py)
SLOWDOWN_METRICS = ("slowdown",)
FLOOR_METRIC = "noise_floor"
# The claims the floor can overturn: "overlap slows compute" in every configuration.
GATED_KINDS = ("every_row_positive",)
A_A = "A/A: two identical overlap passes of a repetition"


@dataclass(frozen=True)
class Judgement:
    cleared: bool | None  # None: no floor was measured for this configuration
    reason: str  # one sentence
    limit: float = math.nan  # threshold(floor)


def _finite(x) -> bool:
    return isinstance(x, int | float) and math.isfinite(x)


def _pct(x: float) -> str:
    return f"{100 * x:.3g} %"


def _interval(row: Mapping) -> str:
    low, high = row.get("ci_low"), row.get("ci_high")
    if _finite(low) and _finite(high):
        return f"{_pct(row['mean'])} [{_pct(low)}, {_pct(high)}]"
    return f"{_pct(row['mean'])} (no CI)"


def threshold(floor: Mapping) -> float:
    """The largest A/A reading the floor allows: the end of its 95 % CI farthest from 0
    (|mean| where there is no CI, n = 1). NaN where no floor was measured."""
    ends = [abs(floor[k]) for k in ("ci_low", "ci_high") if _finite(floor.get(k))]
    if ends:
        return max(ends)
    return abs(floor["mean"]) if _finite(floor.get("mean")) else math.nan


def judge(slowdown: Mapping, floor: Mapping | None) -> Judgement:
    """Whether one configuration's Eq. 1 clears its noise floor.

    `slowdown` and `floor` are that configuration's summary rows (mean, ci_low,
    ci_high). Cleared where the slowdown's CI lies wholly beyond +-threshold(floor), on
    either side (without a CI, its mean).
    """
    limit = threshold(floor) if floor is not None else math.nan
    if math.isnan(limit):
        return Judgement(None, f"Eq. 1 is {_interval(slowdown)}; no noise floor was measured.")
    low, high = slowdown.get("ci_low"), slowdown.get("ci_high")
    if not (_finite(low) and _finite(high)):
        low = high = slowdown["mean"]
    cleared = bool(low > limit or high < -limit)
    return Judgement(
        cleared,
        f"Eq. 1 is {_interval(slowdown)}: it {'clears' if cleared else 'is within'} the noise "
        f"floor ({A_A} differ by up to {_pct(limit)}; floor {_interval(floor)}).",
        limit,
    )


def applies(item: ExpectedItem) -> bool:
    """Whether an expected/ item claims that overlap slows compute (Eq. 1 > 0 everywhere)."""
    return item.metric in SLOWDOWN_METRICS and item.kind in GATED_KINDS


def gate(
    verdict: Verdict, item: ExpectedItem, rows: pd.DataFrame, summary: pd.DataFrame
) -> Verdict:
    """compare's hook: a claim that overlap slows compute, judged 'reproduced', becomes
    'inconclusive' where a configuration's slowdown does not clear its noise floor.
    `rows` are the claim's Eq. 1 rows, `summary` the whole table (it holds the floors)."""
    if verdict.verdict != "reproduced" or not applies(item):
        return verdict
    floors = summary[(summary["mode"] == "derived") & (summary["metric"] == FLOOR_METRIC)]
    floors = floors.set_index(["figure", "config_id"])
    within, unmeasured = [], []
    for row in rows.to_dict("records"):
        key = (row["figure"], row["config_id"])
        j = judge(row, floors.loc[key].to_dict() if key in floors.index else None)
        if j.cleared is None:
            unmeasured.append(row["config_id"])
        elif not j.cleared:
            within.append(
                f"{row['config_id']}: Eq. 1 {_interval(row)}, while two identical overlap "
                f"passes differ by up to {_pct(j.limit)}"
            )
    if within:
        reason = (
            f"Within the noise floor (A/A check) in {len(within)} of {len(rows)} "
            f"configuration(s): {'; '.join(within)}. {verdict.reason}"
        )
        return replace(verdict, verdict="inconclusive", reason=reason)
    note = (
        f"No noise floor was measured for {', '.join(unmeasured)} (no A/A repeat in the records)."
        if unmeasured
        else "Every slowdown clears its noise floor (the A/A check of two overlap passes)."
    )
    reason = verdict.reason
    return replace(verdict, reason=f"{reason}{'' if reason.endswith('.') else '.'} {note}")
