"""summary.csv + expected/ -> verdicts.csv (docs/design.md section 4).

Each expected item is a *number* (a value with a tolerance band, compared through the
95 % CI of the matching rows) or a *claim* (a testable statement). Verdicts:
    reproduced      the CI meets the band / the claim holds on the data
    not reproduced  it does not (the reason says by how much or where)
    not applicable  the item's hardware is absent here (e.g. MI250 numbers on an H200),
                    or the run is a CPU functional check, which evaluates no claim
    not run         the rows it needs are not in this folder (an opt-in figure, or one
                    that did not run; the figure's status file says why)
Numbers from other hardware than the paper's are compared only through hardware-free
quantities (slowdown, penalty, % of TDP): absolute times are never in expected/.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml

from artifact.aggregate import gpus_in, load_summary
from artifact.env import REPO_ROOT
from artifact.errors import ArtifactError
from artifact.store import RunStore
from artifact.verdicts import COLUMNS, as_sentence

EXPECTED_DIR = REPO_ROOT / "expected"
# Fewer repetitions than this and a number is not judged either way (docs/measurement.md,
# "Statistics"): at n = 3 even an honest interval is too wide to tell much, and the
# bootstrap intervals this replaced covered the truth only 73 % of the time.
MIN_REPETITIONS = 5
AGGREGATES = ("mean", "max", "cap_increase")
CLAIM_KINDS = {
    "every_row_positive": ("metric",),
    "group_greater": ("metric", "greater", "lesser"),
    "metric_greater": ("greater_metric", "lesser_metric"),
    "increases_with": ("metric", "along"),
    "decreases_with": ("metric", "along"),
}
NUMBER_KEYS = (
    "id",
    "statement",
    "metric",
    "rows",
    "aggregate",
    "value",
    "tolerance",
    "tolerance_why",
    "source",
    "scope",
)
CLAIM_KEYS = ("id", "statement", "kind", "rows", "source", "scope")
CPU_REASON = "CPU functional check: no claim of the paper is evaluated on a CPU."
# Quantities that mean something only where communication ran beside compute: Eq. 1, the
# sequential penalty, Eq. 4 and its relatives, the overlap fraction, and the changes in
# power that overlap causes. At world size 1 a collective moves no data and runs no kernel.
NEEDS_COMMUNICATION = frozenset(
    {
        "slowdown",
        "matmul_slowdown",
        "slowdown_vs_nocomm",
        "comm_slowdown",
        "sequential_penalty",
        "e2e_ideal_ms",
        "e2e_above_ideal",
        "overlap_fraction",
        "peak_power_increase",
        "mean_power_increase",
        "energy_per_iter_change",
    }
)
NO_COMMUNICATION_REASON = (
    "No communication ran beside compute in these configurations (world size 1), "
    "so there is no overlap to judge."
)


# --- expected/ --------------------------------------------------------------------------


def _need(where: str, item: dict, keys: tuple[str, ...]) -> None:
    for k in keys:
        if k not in item:
            raise ArtifactError(f"{where}: missing key '{k}' (expected keys: {', '.join(keys)})")


def load_expected(directory: Path = EXPECTED_DIR) -> list[dict[str, Any]]:
    """Every item of every expected/*.yaml, schema-checked, with its file's figure."""
    items = []

    def order(path: Path) -> tuple:  # headline first, then fig4 ... fig11 in number order
        digits = "".join(c for c in path.stem if c.isdigit())
        return (path.stem != "headline", int(digits or 0), path.stem)

    for path in sorted(Path(directory).glob("*.yaml"), key=order):
        try:
            doc = yaml.safe_load(path.read_text())
        except yaml.YAMLError as e:
            raise ArtifactError(f"{path.name}: not valid YAML ({str(e).splitlines()[0]})") from None
        if not isinstance(doc, dict) or "figure" not in doc:
            raise ArtifactError(f"{path.name}: expected a mapping with key 'figure'")
        for section, keys in (("numbers", NUMBER_KEYS), ("claims", CLAIM_KEYS)):
            for i, item in enumerate(doc.get(section) or []):
                where = f"{path.name}: {section}[{i}]"
                if not isinstance(item, dict):
                    raise ArtifactError(f"{where}: expected a mapping")
                _need(where, item, keys)
                if not isinstance(item["rows"], dict):
                    raise ArtifactError(
                        f"{where}: 'rows' must be a mapping like {{figure: fig4, mode: derived}}, got {item['rows']!r}"
                    )
                if section == "numbers":
                    if item["aggregate"] not in AGGREGATES:
                        raise ArtifactError(
                            f"{where}: aggregate {item['aggregate']!r}; accepted: {', '.join(AGGREGATES)}"
                        )
                    for k in ("value", "tolerance"):
                        if not isinstance(item[k], int | float):
                            raise ArtifactError(f"{where}: '{k}' must be a number, got {item[k]!r}")
                else:
                    if item["kind"] not in CLAIM_KINDS:
                        raise ArtifactError(
                            f"{where}: kind {item['kind']!r}; accepted: {', '.join(CLAIM_KINDS)}"
                        )
                    _need(where, item, CLAIM_KINDS[item["kind"]])
                if not (item["scope"] == "any" or isinstance(item["scope"], list)):
                    raise ArtifactError(f"{where}: scope must be 'any' or a list of GPU names")
                items.append({**item, "section": section, "file_figure": doc["figure"]})
    if not items:
        raise ArtifactError(f"no expected/*.yaml items under '{directory}'")
    return items


# --- selecting rows ---------------------------------------------------------------------


def _as_list(v: Any) -> list:
    return v if isinstance(v, list) else [v]


def select(summary: pd.DataFrame, filters: dict[str, Any], metric: str | None) -> pd.DataFrame:
    rows = summary
    if metric is not None:
        rows = rows[rows["metric"] == metric]
    for key, want in filters.items():
        rows = rows[rows[key].isin(_as_list(want))]
    return rows


def describe_rows(filters: dict[str, Any]) -> str:
    """{'precision': 'fp32', 'model': ['a', 'b']} -> 'precision fp32, model a or b'."""
    return ", ".join(f"{k} {' or '.join(map(str, _as_list(v)))}" for k, v in filters.items())


def with_communication(summary: pd.DataFrame) -> set[tuple[str, str]]:
    """(figure, config id) of the configurations whose overlap mode ran communication
    kernels: the collective itself, or the stand-in a one-GPU proxy runs (comm_role_ms)."""
    ov = summary[summary["mode"] == "overlap"]
    role = ov[ov["metric"] == "comm_role_ms"]
    comm = ov[ov["metric"] == "communication_ms"]
    keyed = {(r.figure, r.config_id): r.mean for r in comm.itertuples()}
    keyed |= {(r.figure, r.config_id): r.mean for r in role.itertuples()}
    return {k for k, v in keyed.items() if v > 0}


def _fmt(x: float) -> str:
    return "nan" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.4g}"


# --- verdicts ---------------------------------------------------------------------------


def _verdict(
    item, verdict, reason, expected="", tolerance="", mean=math.nan, lo=math.nan, hi=math.nan
):
    return {
        "figure": item["file_figure"],
        "item": item["id"],
        "expected": expected,
        "tolerance": tolerance,
        "mean": mean,
        "ci_low": lo,
        "ci_high": hi,
        "verdict": verdict,
        "reason": as_sentence(reason),
        "statement": item["statement"],
        "metric": item.get("metric", item.get("greater_metric")),
        "unit": "ratio" if item.get("aggregate") == "cap_increase" else None,
        "kind": "derived" if item["rows"].get("mode") == "derived" else "measured",
        "source": "; ".join(f"{k} {v}" for k, v in item["source"].items()),
    }


def _aggregate(item, rows: pd.DataFrame, configs: dict) -> tuple[float, float, float, str]:
    agg = item["aggregate"]
    if agg == "mean":
        return (
            rows["mean"].mean(),
            rows["ci_low"].mean(),
            rows["ci_high"].mean(),
            f"mean of {len(rows)} configuration(s); CI: mean of their CIs",
        )
    if agg == "max":
        top = rows.loc[rows["mean"].idxmax()]
        return (
            top["mean"],
            top["ci_low"],
            top["ci_high"],
            f"largest of {len(rows)} configuration(s): {top['config_id']}",
        )
    # cap_increase: E2E at the strictest cap over uncapped, same base configuration
    capped = [(configs.get(c, {}).get("power_cap_w"), c) for c in rows["config_id"]]
    base = [c for cap, c in capped if cap is None]
    strict = sorted((cap, c) for cap, c in capped if cap is not None)
    if not base or not strict:
        return math.nan, math.nan, math.nan, "needs an uncapped and a capped run"
    b = rows[rows["config_id"] == base[0]].iloc[0]
    s = rows[rows["config_id"] == strict[0][1]].iloc[0]
    return (
        s["mean"] / b["mean"] - 1,
        s["ci_low"] / b["ci_high"] - 1,
        s["ci_high"] / b["ci_low"] - 1,
        f"{strict[0][0]:g} W vs uncapped",
    )


def judge_number(item, rows: pd.DataFrame, configs: dict) -> dict:
    value, tol = float(item["value"]), float(item["tolerance"])
    mean, lo, hi, how = _aggregate(item, rows, configs)
    band = (value - tol, value + tol)
    exp, tols = _fmt(value), _fmt(tol)
    if math.isnan(mean):
        return _verdict(item, "not run", how, exp, tols)
    if math.isnan(lo) or math.isnan(hi):
        lo = hi = mean
        how += "; one repetition, so no CI: the mean is compared"
    hit = lo <= band[1] and hi >= band[0]
    verdict = "reproduced" if hit else "not reproduced"
    reason = f"The 95% CI [{_fmt(lo)}, {_fmt(hi)}] {'meets' if hit else 'misses'} [{_fmt(band[0])}, {_fmt(band[1])}] ({how})"
    return _verdict(item, verdict, reason, exp, tols, mean, lo, hi)


def _names(rows: pd.DataFrame) -> list[str]:
    """Config ids, with their figure where the rows span several figures."""
    if rows["figure"].nunique() <= 1:
        return list(rows["config_id"])
    return [f"{c} ({f})" for f, c in zip(rows["figure"], rows["config_id"], strict=True)]


def judge_claim(item, rows: pd.DataFrame, summary: pd.DataFrame, configs: dict) -> dict:
    kind = item["kind"]
    if kind == "every_row_positive":
        bad = rows[~(rows["ci_low"].fillna(rows["mean"]) > 0)]
        ok = bad.empty
        reason = (
            f"The CI is above 0 in all {len(rows)} configuration(s)"
            if ok
            else f"Not above 0 in {len(bad)} of {len(rows)} configuration(s): {', '.join(_names(bad))}"
        )
        return _verdict(
            item,
            "reproduced" if ok else "not reproduced",
            reason,
            "> 0",
            "",
            rows["mean"].mean(),
            rows["ci_low"].min(),
            rows["ci_high"].max(),
        )
    if kind == "group_greater":
        a, b = select(rows, item["greater"], None), select(rows, item["lesser"], None)
        greater, lesser = describe_rows(item["greater"]), describe_rows(item["lesser"])
        if a.empty or b.empty:
            return _verdict(item, "not run", f"It needs rows for both {greater} and {lesser}.")
        ok = a["ci_low"].mean() > b["ci_high"].mean()
        reason = (
            f"{greater}: {_fmt(a['mean'].mean())} [{_fmt(a['ci_low'].mean())}, {_fmt(a['ci_high'].mean())}] vs "
            f"{lesser}: {_fmt(b['mean'].mean())} [{_fmt(b['ci_low'].mean())}, {_fmt(b['ci_high'].mean())}]"
            + (
                ""
                if ok
                else (
                    "; ordered as claimed but the CIs overlap"
                    if a["mean"].mean() > b["mean"].mean()
                    else "; the other way round"
                )
            )
        )
        return _verdict(
            item,
            "reproduced" if ok else "not reproduced",
            reason,
            f"{greater} above {lesser}",
            "",
            a["mean"].mean() - b["mean"].mean(),
        )
    if kind == "metric_greater":
        g = select(summary, item["rows"], item["greater_metric"]).set_index(["figure", "config_id"])
        lsr = select(summary, item["rows"], item["lesser_metric"]).set_index(
            ["figure", "config_id"]
        )
        common = g.index.intersection(lsr.index)
        if common.empty:
            return _verdict(
                item,
                "not run",
                f"no rows with both {item['greater_metric']} and {item['lesser_metric']}",
            )
        fails = [f"{c[1]} ({c[0]})" for c in common if not g.loc[c, "mean"] > lsr.loc[c, "mean"]]
        ok = not fails
        reason = (
            f"{item['greater_metric']} > {item['lesser_metric']} in all {len(common)} configuration(s)"
            if ok
            else f"not so in: {', '.join(fails)}"
        )
        return _verdict(
            item,
            "reproduced" if ok else "not reproduced",
            reason,
            f"{item['greater_metric']} above {item['lesser_metric']}",
            "",
            float((g.loc[common, "mean"] - lsr.loc[common, "mean"]).mean()),
        )
    # increases_with / decreases_with a configuration field
    along = item["along"]
    pts = sorted(
        (configs.get(c, {}).get(along), m)
        for c, m in zip(rows["config_id"], rows["mean"], strict=True)
        if configs.get(c, {}).get(along) is not None
    )
    if len({x for x, _ in pts}) < 2:
        return _verdict(
            item, "not run", f"needs configurations with at least two values of {along}"
        )
    means = np.array([m for _, m in pts])
    diffs = np.diff(means)
    ok = bool((diffs > 0).all()) if kind == "increases_with" else bool((diffs < 0).all())
    reason = f"{along} -> mean: " + ", ".join(f"{x:g}: {_fmt(m)}" for x, m in pts)
    return _verdict(
        item,
        "reproduced" if ok else "not reproduced",
        reason,
        kind.replace("_", " ") + f" {along}",
        "",
    )


def compare(out: Path, expected_dir: Path = EXPECTED_DIR) -> pd.DataFrame:
    items = load_expected(expected_dir)
    summary = load_summary(out)
    cfg_path = Path(out) / "configs.json"
    configs = json.loads(cfg_path.read_text()) if cfg_path.is_file() else {}
    status = RunStore(out).status()
    gpus = gpus_in(summary)
    on_cpu = not gpus
    rows_out = []
    for item in items:
        figures = _as_list(item["rows"].get("figure", item["file_figure"]))
        exp = (
            (_fmt(item["value"]), _fmt(item["tolerance"]))
            if item["section"] == "numbers"
            else ("", "")
        )
        if on_cpu:
            rows_out.append(_verdict(item, "not applicable", CPU_REASON, *exp))
            continue
        scope = item["scope"]
        if scope != "any" and not any(s.lower() in g.lower() for s in scope for g in gpus):
            rows_out.append(
                _verdict(
                    item,
                    "not applicable",
                    f"the paper's item is for {', '.join(scope)}; this run has {', '.join(gpus)}",
                    *exp,
                )
            )
            continue
        metric = (
            item.get("metric")
            if item["section"] == "numbers" or item["kind"] != "metric_greater"
            else item["greater_metric"]
        )
        rows = select(summary, item["rows"], metric)
        if metric in NEEDS_COMMUNICATION:
            ran = with_communication(summary)
            # the configurations the item is about, whatever metrics they have: without
            # communication the overlap fraction has no rows at all (it is undefined)
            about = select(summary, {k: v for k, v in item["rows"].items() if k != "mode"}, None)
            keys = set(zip(about["figure"], about["config_id"], strict=True))
            rows = rows[[k in ran for k in zip(rows["figure"], rows["config_id"], strict=True)]]
            if rows.empty and keys and not keys & ran:
                rows_out.append(_verdict(item, "not applicable", NO_COMMUNICATION_REASON, *exp))
                continue
        if rows.empty:
            why = [
                f"{f}: {status[f]['reason']}"
                for f in figures
                if f in status and status[f]["status"] != "ran"
            ]
            reason = (
                "; ".join(why)
                if why
                else f"no {metric} rows for {', '.join(figures)} in this folder"
            )
            rows_out.append(_verdict(item, "not run", reason, *exp))
            continue
        v = (
            judge_number(item, rows, configs)
            if item["section"] == "numbers"
            else judge_claim(item, rows, summary, configs)
        )
        n = int(rows["n"].min())
        v["n"] = n
        if "ci_method" in rows:
            v["ci_method"] = "; ".join(sorted(set(rows["ci_method"].dropna().astype(str))))
        if v["verdict"] in ("reproduced", "not reproduced") and n < MIN_REPETITIONS:
            v["verdict"] = "inconclusive"
            v["reason"] = (
                f"Too few repetitions to judge (n = {n}; a verdict needs {MIN_REPETITIONS}): "
                + v["reason"]
            )
        if rows["parallelism"].astype(str).str.startswith("proxy").any():
            v["reason"] += " (rows include one-GPU proxies)"
        rows_out.append(v)
    verdicts = pd.DataFrame(rows_out, columns=COLUMNS)
    units = summary.groupby("metric")["unit"].first() if "unit" in summary else {}  # rows' unit
    verdicts["unit"] = verdicts["unit"].fillna(verdicts["metric"].map(units)).fillna("")
    return verdicts


def write_verdicts(out: Path, expected_dir: Path = EXPECTED_DIR) -> pd.DataFrame:
    verdicts = compare(out, expected_dir)
    RunStore(out).write_text("verdicts.csv", verdicts.to_csv(index=False))
    return verdicts
