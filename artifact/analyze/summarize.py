"""`summarize`: every record under OUT -> summary.csv, configs.json, provenance.json
(docs/design.md section 2, step 6)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from artifact.analyze.aggregate import configs_of, provenance_of, summarize
from artifact.core.errors import ArtifactError
from artifact.figures import REGISTRY
from artifact.run import runplan
from artifact.store import RunStore, check_uniform_env, strict_json


def planned_records(out: Path) -> list[dict]:
    """The records under OUT that the folder's plan asks for: a --reps 3 run into a
    folder that once held 5 reports n = 3."""
    store = RunStore(out)
    records = store.records()
    if not records and not store.status():
        raise ArtifactError(f"no records under '{store.records_dir}'")
    planned = runplan.planned_reps(out)
    return [r for r in records if r["rep"] < planned.get(r["figure"], r["rep"] + 1)]


def write_summary(out: Path, allow_mixed: bool = False) -> pd.DataFrame:
    """Rebuild OUT/summary.csv (and configs.json, provenance.json) from OUT's records,
    refusing records of several environments unless `allow_mixed`."""
    records = planned_records(out)
    check_uniform_env(records, allow_mixed)
    derived = {name: spec.derived for name, spec in REGISTRY.items()}
    summary = summarize(records, derived)
    store = RunStore(out)
    store.write_text("summary.csv", summary.to_csv(index=False))
    store.write_text(
        "configs.json", json.dumps(strict_json(configs_of(records)), indent=1, sort_keys=True)
    )
    store.write_text(
        "provenance.json", json.dumps(strict_json(provenance_of(records)), indent=1, sort_keys=True)
    )
    return summary
