"""`summarize`: every record under OUT -> summary.csv, configs.json, provenance.json
(docs/design.md section 2, step 6)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from artifact.analyze import stopping
from artifact.analyze.aggregate import configs_of, provenance_of, summarize
from artifact.core.errors import ArtifactError
from artifact.figures import REGISTRY
from artifact.store import RunStore, check_uniform_env, planned_reps, strict_json


def planned_records(out: Path) -> list[dict]:
    """The records under OUT that the folder's plan asks for: a --reps 3 run into a
    folder that once held 5 reports n = 3."""
    store = RunStore(out)
    records = store.records()
    if not records and not store.status():
        raise ArtifactError(f"no records under '{store.records_dir}'")
    planned = planned_reps(out)
    return [r for r in records if r["rep"] < planned.get(r["figure"], r["rep"] + 1)]


STEIN = "Stein's floor (pilot n = 5)"  # appended to the ci_method of the rows it widens


def with_stein_floor(
    summary: pd.DataFrame, decisions: dict[tuple[str, str], dict]
) -> pd.DataFrame:  # fmt: skip
    """Each quantity an adaptive configuration was stopped by (its stopping.json's pilot)
    reports at least Stein's interval (stopping.stein_interval: estimate +- t(0.975, 4) x
    the pilot's spread / sqrt(n)), whatever n the rule gave it (docs/measurement.md,
    "Adaptive repetitions"): the usual CI alone is narrow exactly where the pilot's spread
    came out low and stopped the run early."""
    summary = summary.copy()
    for (figure, config_id), d in decisions.items():
        for metric, (half, _tolerance) in d.get("pilot", {}).items():
            if half is None:  # no pilot CI (n = 5 gave none): nothing to widen by
                continue
            rows = (
                (summary["figure"] == figure)
                & (summary["config_id"] == config_id)
                & (summary["metric"] == metric)
                & summary["mode"].isin(d.get("modes", {}).get(metric, ["derived"]))
            )
            r = summary.loc[rows]
            low, high = stopping.stein_interval(
                r["mean"], r["ci_low"], r["ci_high"], stopping.spread_of(half), r["n"]
            )
            summary.loc[rows, "ci_low"], summary.loc[rows, "ci_high"] = low, high
            summary.loc[rows, "ci_method"] = r["ci_method"].astype(str) + f"; {STEIN}"
    return summary


def write_summary(out: Path, allow_mixed: bool = False) -> pd.DataFrame:
    """Rebuild OUT/summary.csv (and configs.json, provenance.json) from OUT's records,
    refusing records of several environments unless `allow_mixed`."""
    records = planned_records(out)
    check_uniform_env(records, allow_mixed)
    derived = {name: spec.derived for name, spec in REGISTRY.items()}
    store = RunStore(out)
    summary = with_stein_floor(summarize(records, derived), store.stopping())
    store.write_text("summary.csv", summary.to_csv(index=False))
    store.write_text(
        "configs.json", json.dumps(strict_json(configs_of(records)), indent=1, sort_keys=True)
    )
    store.write_text(
        "provenance.json", json.dumps(strict_json(provenance_of(records)), indent=1, sort_keys=True)
    )
    return summary
