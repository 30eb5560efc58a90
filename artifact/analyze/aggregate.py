"""Records -> summary.csv: statistics of every measured metric, then the derived ones.

One row per (figure, gpu, model, parallelism, precision, mode, metric), as docs/design.md
section 5 says. Measured rows are statistics over repetitions of one mode's metric.
Derived rows (mode 'derived') combine modes through the paper's equations: the estimate
is the equation on the means, the CI comes from the repetitions with every input
present, each repetition's modes kept together (metrics.describe_derived); their n is
the number of such complete repetitions. Column ci_method says how each CI was made
(docs/measurement.md, "Statistics").
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd

from artifact.analyze.metrics import describe, describe_derived
from artifact.command import invocation
from artifact.core.errors import ArtifactError
from artifact.figures.spec import Derived

DIMENSIONS = ("figure", "gpu", "model", "parallelism", "precision", "mode", "metric")
STATS = ("mean", "std", "ci_low", "ci_high", "n", "cv", "noisy")
COLUMNS = (*DIMENSIONS, *STATS, "unit", "kind", "config_id", "note", "ci_method")


def gpus_in(summary: pd.DataFrame) -> list[str]:
    """The GPU models a summary's rows ran on (none: a CPU run)."""
    return sorted({g for g in summary.get("gpu", pd.Series(dtype=str)).dropna() if g != "cpu"})


def load_summary(out: Path) -> pd.DataFrame:
    """OUT/summary.csv, checked: a missing, empty or malformed one is a one-line error."""
    path = Path(out) / "summary.csv"
    if not Path(out).is_dir():
        raise ArtifactError(f"no results folder '{out}'")
    if not path.is_file():
        raise ArtifactError(
            f"no summary.csv in '{out}': run `{invocation()} summarize {out}` first"
        )
    try:
        summary = pd.read_csv(path)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as e:
        raise ArtifactError(f"'{path}' is not a summary table ({str(e).splitlines()[0]})") from None
    missing = [c for c in COLUMNS[: len(DIMENSIONS) + len(STATS)] if c not in summary.columns]
    if missing:
        raise ArtifactError(
            f"'{path}' is not a summary table: missing columns {', '.join(missing)}"
        )
    return summary


def by_key(summary: pd.DataFrame) -> pd.DataFrame:
    """summary.csv's rows indexed by (figure, config_id, mode, metric), unique in a summary
    (a config id alone is not: fig4, fig10 and fig11 share their FSDP FP16 configuration)."""
    return summary.set_index(["figure", "config_id", "mode", "metric"])


def configs_of(records: Iterable[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """config id -> its configuration (written beside summary.csv, read by compare)."""
    return {r["config_id"]: r["config"] for r in records}


# provenance keys whose every value the report shows (code, preset, the pinned stack)
VARYING_KEYS = (
    *("git_commit", "preset", "torch", "deepspeed", "megatron_core", "nvidia_ml_py"),
    *("ranks_per_gpu", "mps"),
)


def provenance_of(records: list[dict[str, Any]]) -> dict[str, Any]:
    """What the report says of the run's machine and stack (provenance.json): the first
    record's provenance, the first and last timestamps, every value of VARYING_KEYS, and
    every process that shared a GPU with any repetition."""
    provs = [r["provenance"] for r in records]
    stamps = sorted(str(p["timestamp"]) for p in provs if p.get("timestamp"))
    shared = {p.get("other_gpu_processes") or "" for p in provs} - {""}
    return {
        "provenance": provs[0] if provs else {},
        "timestamps": [stamps[0], stamps[-1]] if stamps else [],
        "values": {
            k: sorted({str(p[k]) for p in provs if p.get(k) is not None}) for k in VARYING_KEYS
        },
        "other_gpu_processes": sorted(shared),
    }


def summarize(records: Iterable[dict[str, Any]], derived: dict[str, list[Derived]]) -> pd.DataFrame:
    """summary.csv's table. `derived` maps a figure to its derived quantities."""
    groups: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for r in records:
        groups[(r["figure"], r["config_id"])].append(r)
    rows = []
    for (figure, config_id), recs in sorted(groups.items()):
        config = recs[0]["config"]
        base = {
            "figure": figure,
            "gpu": config.get("gpu"),
            "model": config.get("model"),
            "parallelism": config.get("parallelism"),
            "precision": config.get("precision"),
            "config_id": config_id,
            "note": config.get("note", ""),
        }
        # (mode, metric) -> repetition -> value; n/a (None, NaN) dropped. The store holds
        # one record per (config, mode, rep), so a repetition is one value of each.
        values: dict[tuple[str, str], dict[int, float]] = defaultdict(dict)
        units: dict[str, str] = {}
        for r in sorted(recs, key=lambda r: (r["mode"], r["rep"])):
            for metric, v in r["metrics"].items():
                if v is not None and not math.isnan(v):
                    values[(r["mode"], metric)][r["rep"]] = v
            units.update(r["units"])
        for (mode, metric), by_rep in sorted(values.items()):
            s = describe(list(by_rep.values()))
            if s.n == 0:
                continue
            rows.append(
                {
                    **base,
                    "mode": mode,
                    "metric": metric,
                    **s.as_dict(),
                    "unit": units[metric],
                    "kind": "measured",
                }
            )
        for d in derived.get(figure, []):
            inputs = [values.get(inp, {}) for inp in d.inputs]
            # paired: only repetitions in which every input was measured
            complete = sorted(set.intersection(*(set(v) for v in inputs)))
            if not complete:
                continue
            s = describe_derived(d.fn, *([v[rep] for rep in complete] for v in inputs))
            rows.append(
                {
                    **base,
                    "mode": "derived",
                    "metric": d.metric,
                    **s.as_dict(),
                    "unit": d.unit,
                    "kind": "derived",
                }
            )
    return pd.DataFrame(rows, columns=list(COLUMNS))


def v2_delays(summary: pd.DataFrame, configs: dict[str, dict], figure: str) -> pd.DataFrame:
    """One row a delay of `figure` (V2's delay injection): injected delay and the E2E times,
    measured and derived (ms)."""
    means = by_key(summary)["mean"]

    def _mean(cid: str, mode: str, metric: str) -> float:
        return float(means.get((figure, cid, mode, metric), math.nan))

    rows = []
    ids = sorted(set(summary.loc[summary["figure"] == figure, "config_id"]))
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
