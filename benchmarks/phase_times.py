"""Where a run's time went, figure by figure and phase by phase, from its folder alone.

Each figure's wall time is its log's `==== ended: ... after S s` lines (summed over the
runs that resumed it). The records give the measured parts: settling (`settle_s`, once a
repetition of interleaved rounds, else once a phase), the timed iterations (`timed_iters`
x `e2e_ms`; fig7's blocks: `window_s`), the profiled pass (`profiled_iters` x `e2e_ms`: the profiler's own overhead
falls in the rest). What is left of the wall time is start-up, set-up and the rest:
process start and imports, engine builds and warm-up steps, the matmul-peak calibration,
the profiler's trace export, and writing. A copied record (`reused_from`) cost nothing.
Usage: python benchmarks/phase_times.py DIR [--json]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from artifact.store import RunStore  # noqa: E402

ENDED = re.compile(r"^==== ended: (?:exit \d+|interrupted) after ([\d.]+) s", re.M)


def wall_s(log: Path) -> float:
    return (
        sum(float(s) for s in ENDED.findall(log.read_text(errors="replace")))
        if log.is_file()
        else 0.0
    )


def _ms(m: dict, key: str) -> float:
    v = m.get(key)
    return float(v) if isinstance(v, int | float) else 0.0


def phases(folder: Path) -> dict[str, dict[str, float]]:
    """figure -> seconds of wall, settling, timed, profiled, and the rest; records counted."""
    out: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    settled: set[tuple] = set()
    for r in RunStore(folder).records():
        if r.get("reused_from"):
            continue
        fig, m = r["figure"], r["metrics"]
        row = out[fig]
        row["records"] += 1
        shared = r.get("timed") == "interleaved rounds"  # one settling a repetition
        key = (
            (fig, r["config_id"], r["rep"])
            if shared
            else (fig, r["config_id"], r["rep"], r["mode"])
        )
        if key not in settled:
            settled.add(key)
            row["settling"] += _ms(m, "settle_s")
        e2e = _ms(m, "e2e_ms") / 1e3
        # fig7's power trace: its blocks' window, not timed iterations
        row["timed"] += _ms(m, "timed_iters") * e2e or _ms(m, "window_s")
        row["profiled"] += _ms(m, "profiled_iters") * e2e
    for log in sorted(folder.glob("logs/*.log")):
        if log.stem in out or wall_s(log):
            out[log.stem]["wall"] = wall_s(log)
    for row in out.values():
        for c in ("records", "settling", "timed", "profiled"):
            row.setdefault(c, 0.0)
        row["rest"] = row["wall"] - row["settling"] - row["timed"] - row["profiled"]
    return {f: dict(v) for f, v in out.items() if v.get("wall")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir", type=Path)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    rows = phases(a.dir)
    if a.json:
        print(json.dumps(rows, indent=1, sort_keys=True))
        return
    cols = ("wall", "rest", "settling", "timed", "profiled")
    print(f"{'figure':<11}" + "".join(f"{c:>10}" for c in cols) + f"{'records':>9}  (seconds)")
    total = defaultdict(float)
    for fig, row in rows.items():
        print(f"{fig:<11}" + "".join(f"{row[c]:>10.0f}" for c in cols) + f"{row['records']:>9.0f}")
        for c in (*cols, "records"):
            total[c] += row[c]
    print(
        f"{'all':<11}" + "".join(f"{total[c]:>10.0f}" for c in cols) + f"{total['records']:>9.0f}"
    )
    share = {c: 100 * total[c] / total["wall"] for c in cols[1:]} if total["wall"] else {}
    print("shares of the wall time: " + ", ".join(f"{c} {v:.0f} %" for c, v in share.items()))


if __name__ == "__main__":
    main()
