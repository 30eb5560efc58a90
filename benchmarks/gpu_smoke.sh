#!/usr/bin/env bash
# One device call: install the carried wheels, then time a few figures at 2 repetitions
# so the quick preset's per-figure cost can be read from the records' timestamps.
# Usage (repository root, on the GPU machine): bash benchmarks/gpu_smoke.sh OUT_DIR FIG...
set -uo pipefail
out=${1:?out dir}; shift
export PYTHONUNBUFFERED=1
run=/tmp/smoke
for fig in "$@"; do
  start=$(date +%s)
  python3 -m artifact run "$fig" --reps 2 --out "$run" > "$out/$fig.log" 2>&1
  echo "$fig exit $? after $(( $(date +%s) - start )) s"
done
tar czf "$out/smoke.tgz" -C "$run" records status logs summary.csv 2>/dev/null
