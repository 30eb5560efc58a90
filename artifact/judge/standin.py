"""The NCCL-shaped stand-in's validation (item_type "check", a check the contention map's
spec declares): on one
GPU, its twin of W co-located NCCL ranks (the same total CTAs and bytes, paced to NCCL's
time a collective) against those ranks. The stand-in is "validated" on this GPU model
where the 95 % CI of the difference of the two Eq. 1 slowdowns (each beyond its zero-byte
control where measured) lies within +-VALIDATION_POINTS; "not validated" where it lies
wholly outside; inconclusive otherwise (verdicts.equivalence).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import pandas as pd
from scipy import stats

from artifact.core.emulated import VALIDATION_WORDS as WORDS
from artifact.core.mechanisms import VALIDATION_POINTS
from artifact.judge.validation import V1_MARGIN
from artifact.judge.verdicts import as_sentence, equivalence

ITEM = "stand_in_matches_colocated_nccl"
# Co-located NCCL is the reference only where it ran beside the compute: below this
# overlap fraction (the collective's time inside the compute's) it mostly ran before or
# after it (on an H100 its ranks' kernels waited for the GEMM), and there is no verdict.
MIN_OVERLAP = 0.5


def _slowdown(summary: pd.DataFrame, config_id: str) -> dict | None:
    """The configuration's Eq. 1 beyond its control, else its Eq. 1: mean, CI, n."""
    rows = summary[(summary["config_id"] == config_id) & (summary["mode"] == "derived")]
    for metric in ("slowdown_beyond_control", "slowdown"):
        hit = rows[rows["metric"] == metric]
        if not hit.empty:
            return hit.iloc[0].to_dict()
    return None


def _vs_nocomm(summary: pd.DataFrame, config_id: str) -> dict | None:
    """The configuration's compute slowdown against nocomm (its compute with no
    communication at all): mean, CI, n."""
    rows = summary[
        (summary["config_id"] == config_id)
        & (summary["mode"] == "derived")
        & (summary["metric"] == "slowdown_vs_nocomm")
    ]
    return rows.iloc[0].to_dict() if not rows.empty else None


def v1_fails(summary: pd.DataFrame, config_id: str) -> bool:
    """Whether the configuration's V1 fails: its sequential compute is not nocomm's (the
    whole CI of the gap outside +-V1_MARGIN), so Eq. 1's baseline is not compute alone."""
    rows = summary[
        (summary["config_id"] == config_id)
        & (summary["mode"] == "derived")
        & (summary["metric"] == "v1_baseline_gap")
    ]
    if rows.empty:
        return False
    r = rows.iloc[0]
    return bool(r["ci_low"] > V1_MARGIN or r["ci_high"] < -V1_MARGIN)


def scale_of(summary: pd.DataFrame, ids: list[str]) -> str:
    """The scale the rule reads: Eq. 1, or the slowdown vs nocomm where either side's V1
    fails (Eq. 1's sequential baseline is then not compute alone)."""
    return "vs nocomm" if any(v1_fails(summary, c) for c in ids) else "Eq. 1"


def _overlap(summary: pd.DataFrame, config_id: str) -> dict | None:
    """The overlap phase's overlap fraction: mean, CI, n."""
    rows = summary[
        (summary["config_id"] == config_id)
        & (summary["mode"] == "overlap")
        & (summary["metric"] == "overlap_fraction")
    ]
    return rows.iloc[0].to_dict() if not rows.empty else None


def difference(a: Mapping, b: Mapping) -> tuple[float, float, float, int]:
    """a - b with a Welch 95 % CI from the two rows' own t intervals: (mean, low, high, n)."""

    def se(r):
        n = int(r["n"])
        return (r["ci_high"] - r["ci_low"]) / (2 * stats.t.ppf(0.975, n - 1)) if n > 1 else math.nan

    sa, sb, na, nb = se(a), se(b), int(a["n"]), int(b["n"])
    d = a["mean"] - b["mean"]
    var = sa**2 + sb**2
    if not var > 0:
        return d, math.nan, math.nan, min(na, nb)
    df = var**2 / (sa**4 / (na - 1) + sb**4 / (nb - 1))
    half = stats.t.ppf(0.975, df) * math.sqrt(var)
    return d, d - half, d + half, min(na, nb)


def _peers(cfg: dict, configs: Mapping[str, dict]) -> list[str]:
    """The co-located NCCL configurations a twin stands for: same model and bytes."""
    return [
        cid
        for cid, c in configs.items()
        if c.get("parallelism") == cfg["twin_of"]
        and c.get("model") == cfg.get("model")
        and c.get("comm_bytes") == cfg.get("comm_bytes")
    ]


def _base_row(figure: str, twin_id: str, cfg: dict) -> dict:
    """The fields of a twin's check row that do not depend on its numbers."""
    w = cfg.get("ranks")
    return {
        "figure": figure,
        "item": ITEM,
        "expected": "0",
        "tolerance": f"{VALIDATION_POINTS / 100:g}",
        "statement": (
            f"the NCCL-shaped stand-in slows the matmul as {w} co-located NCCL ranks do, "
            f"within {VALIDATION_POINTS:g} points"
        ),
        "metric": "slowdown",  # slowdown_vs_nocomm where the rule reads it (_judged)
        "unit": "ratio",
        "kind": "derived",
        "source": "artifact: stand-in validation",
        "item_type": "check",
        "config_id": twin_id,
    }


def _not_run(missing: str) -> dict:
    return {
        "mean": math.nan,
        "ci_low": math.nan,
        "ci_high": math.nan,
        "verdict": "not run",
        "n": 0,
        "ci_method": "",
        "reason": as_sentence(f"no Eq. 1 rows for {missing}"),
    }


def _apart(summary: pd.DataFrame, twin_id: str, peer: str) -> tuple[str, str] | None:
    """(inconclusive, why) where co-located NCCL mostly ran before or after the compute
    (its overlap fraction's CI below MIN_OVERLAP), else None."""
    ran_beside = _overlap(summary, peer)
    if ran_beside is None or not ran_beside["ci_high"] < MIN_OVERLAP:
        return None
    twin_beside = _overlap(summary, twin_id) or {"mean": math.nan}
    return (
        "inconclusive",
        (
            f"co-located NCCL overlapped the compute for only {100 * ran_beside['mean']:.0f} % "
            f"of its time (95 % CI up to {100 * ran_beside['ci_high']:.0f} %; the stand-in "
            f"{100 * twin_beside['mean']:.0f} %), under {100 * MIN_OVERLAP:.0f} %: the two did "
            "not run side by side, so their slowdowns are not comparable"
        ),
    )


def _judged(summary: pd.DataFrame, twin_id: str, peer: str, cfg: dict) -> dict:
    """The twin's difference to co-located NCCL on the scale the rule reads, judged."""
    edge = VALIDATION_POINTS / 100
    scale = scale_of(summary, [twin_id, peer])
    both = {
        "Eq. 1": (_slowdown(summary, twin_id), _slowdown(summary, peer)),
        "vs nocomm": (_vs_nocomm(summary, twin_id), _vs_nocomm(summary, peer)),
    }
    if scale == "vs nocomm" and None in both[scale]:
        scale = "Eq. 1"  # no nocomm rows: the only scale there is
    twin, real = both[scale]
    d, lo, hi, n = difference(twin, real)
    verdict, why = _apart(summary, twin_id, peer) or equivalence(
        lo, hi, n, (-edge, edge), percent=True
    )
    shown = "; ".join(
        f"{name}: {100 * (dd := difference(a, b))[0]:+.2f} points [{100 * dd[1]:+.2f}, {100 * dd[2]:+.2f}]"
        for name, (a, b) in both.items()
        if a is not None and b is not None
    )
    read = (
        "read vs nocomm: V1 fails on these rows, so Eq. 1's sequential baseline is not "
        "compute alone"
        if scale == "vs nocomm"
        else "read on Eq. 1 (V1 does not fail on these rows)"
    )
    return {
        "metric": "slowdown" if scale == "Eq. 1" else "slowdown_vs_nocomm",
        "mean": d,
        "ci_low": lo,
        "ci_high": hi,
        "verdict": verdict,
        "n": n,
        "ci_method": "Welch t on the two t intervals",
        "reason": as_sentence(
            f"{WORDS[verdict]}: stand-in {100 * twin['mean']:+.2f} % vs co-located NCCL "
            f"{100 * real['mean']:+.2f} % (W = {cfg.get('ranks')}, {cfg.get('ctas')} CTAs in all, paced to "
            f"{cfg.get('paced_to_ms', math.nan):.3g} ms a collective); difference "
            f"{100 * d:+.2f} points [{100 * lo:+.2f}, {100 * hi:+.2f}], {read}; both "
            f"scales: {shown}; {why}"
        ),
    }


def verdict_rows(summary: pd.DataFrame, configs: Mapping[str, dict], figure: str) -> list[dict]:
    """One check row a twin of `figure`'s configurations: the stand-in against its
    co-located NCCL ranks, or "not run" where either has no Eq. 1 rows."""
    out = []
    for twin_id, cfg in sorted(configs.items()):
        if not cfg.get("twin_of"):
            continue
        peers = _peers(cfg, configs)
        twin = _slowdown(summary, twin_id)
        real = _slowdown(summary, peers[0]) if peers else None
        if twin is None or real is None:
            missing = twin_id if twin is None else (peers[0] if peers else cfg["twin_of"])
            out.append(_base_row(figure, twin_id, cfg) | _not_run(missing))
        else:
            out.append(_base_row(figure, twin_id, cfg) | _judged(summary, twin_id, peers[0], cfg))
    return out
