#!/usr/bin/env bash
# One device call's worth of GPU work (read-only: no clocks or limits are changed).
# Usage on a GPU machine, from the repository root: bash benchmarks/gpu_session.sh OUT_DIR
set -uo pipefail
out=${1:?out dir}
export PYTHONUNBUFFERED=1 PYTHONPATH=.
mkdir -p "$out"
python3 -m artifact env --json > "$out/env.json"
python3 benchmarks/bench_measure.py --json "$out/bench.json" 2>&1 | grep -v Warning | tail -16
python3 -m artifact run fig8 --preset quick --out /tmp/fig8 > "$out/fig8.log" 2>&1
echo "fig8 exit $?"
cp /tmp/fig8/summary.csv "$out/summary.csv"
tar czf "$out/fig8_run.tgz" -C /tmp fig8
