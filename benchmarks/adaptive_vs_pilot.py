"""An adaptive run (`run --adaptive`) against fixed n = 5 on the same records: the
verdicts of all its repetitions (Stein's floor) beside those of its pilot alone (its first
5 repetitions, as a fixed n = 5 run would have them), the repetitions each configuration
took and the time they cost (issue 32).

Usage: python benchmarks/adaptive_vs_pilot.py RUN [--json]
Prints two tables; exit 1 where a verdict differs. RUN is not changed: the pilot's
view is a copy in a temporary folder (records of repetitions 5 and on, and the stopping
decisions, left out; the plan asking for 5).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd

PILOT = 5


def pilot_copy(run: Path, to: Path) -> None:
    shutil.copytree(run, to, ignore=shutil.ignore_patterns("traces", "report"))
    for f in to.glob("records/*/*/*/rep-*.json"):
        if int(f.stem.split("-")[1]) >= PILOT:
            f.unlink()
    for f in to.glob("records/*/*/stopping.json"):
        f.unlink()
    plan = json.loads((to / "plan.json").read_text())
    for fig in plan["figures"].values():
        fig["reps"] = PILOT
        fig["options"].pop("adaptive", None)
    (to / "plan.json").write_text(json.dumps(plan, indent=1))
    for f in ("summary.csv", "verdicts.csv"):
        (to / f).unlink(missing_ok=True)


def verdicts(run: Path) -> pd.DataFrame:
    for stage in ("summarize", "compare"):
        subprocess.run(
            [sys.executable, "-m", "artifact", stage, str(run)], check=True, capture_output=True
        )
    return pd.read_csv(run / "verdicts.csv")


def reps_and_time(run: Path) -> pd.DataFrame:
    """Per configuration measured here: repetitions, the decision, and the seconds its
    repetitions past the pilot took (the end of the pilot's last record to the end of
    the last; a gap over 60 s between two repetitions is a restart between device calls,
    counted at the median repetition)."""
    rows = []
    for cfg in sorted(run.glob("records/*/*/")):
        ends: dict[int, dt.datetime] = {}
        copied = False
        for f in cfg.glob("*/rep-*.json"):
            r = json.loads(f.read_text())
            copied |= "reused_from" in r or "reused_from" in r["provenance"]
            t = dt.datetime.fromisoformat(r["provenance"]["timestamp"])
            ends[r["rep"]] = max(ends.get(r["rep"], t), t)
        stop = cfg / "stopping.json"
        d = json.loads(stop.read_text()) if stop.is_file() else {}
        steps = pd.Series([(ends[k] - ends[k - 1]).total_seconds() for k in sorted(ends)[1:]])
        med = steps.median() if len(steps) else float("nan")
        extra = steps[PILOT - 1 :].where(steps <= 60, med)
        rows.append(
            {
                "figure": cfg.parent.name,
                "config_id": cfg.name,
                "reps": len(ends),
                "decided": f"{d['n']} of {d['max']}" if d else "no decision (unfinished)",
                "s_per_rep": round(med, 1),
                "s_past_pilot": 0.0 if copied else round(float(extra.sum()), 1),
                "copied": copied,
                "why": d.get("why", ""),
            }
        )
    return pd.DataFrame(rows)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run", type=Path)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        pilot = Path(tmp) / "pilot"
        pilot_copy(a.run, pilot)
        five = verdicts(pilot)
    full = pd.read_csv(a.run / "verdicts.csv")
    key = ["figure", "item", "config_id"]
    both = full.merge(five, on=key, how="outer", suffixes=("_adaptive", "_n5"))
    both["same"] = both["verdict_adaptive"] == both["verdict_n5"]
    reps = reps_and_time(a.run)
    if a.json:
        print(json.dumps({"verdicts": both[[*key, "verdict_adaptive", "verdict_n5", "n_adaptive", "n_n5"]].to_dict("records"), "reps": reps.to_dict("records")}, default=str))  # fmt: skip
    else:
        judged = both[both["config_id"].notna()]
        print(
            judged[[*key, "verdict_n5", "verdict_adaptive", "n_n5", "n_adaptive"]].to_string(
                index=False
            )
        )
        print(f"\n{int(both['same'].sum())} of {len(both)} verdicts the same "
              f"({len(judged)} judged per configuration, the rest 'not applicable' or 'not run' in both)\n")  # fmt: skip
        print(reps.drop(columns="why").to_string(index=False))
        print(f"\nseconds past the pilot: {reps['s_past_pilot'].sum():.0f}")
    return 0 if both["same"].all() else 1


if __name__ == "__main__":
    sys.exit(main())
