#!/usr/bin/env bash
# One device call's worth of GPU work (read-only: no clocks or limits are changed).
# Usage on a GPU machine: bash benchmarks/gpu_session.sh OUT_DIR
set -uo pipefail
out=${1:?out dir}
export PYTHONUNBUFFERED=1
mkdir -p "$out"
python3 -m artifact env --json > "$out/env.json"
torchrun --standalone --nproc-per-node 1 benchmarks/nccl_onerank_probe.py 2>&1 | grep -v Warning | tee "$out/nccl_onerank.txt"
python3 -m artifact run fig8 --preset quick --out /tmp/fig8 2>&1 | tee "$out/fig8.log" | grep -E "rep [0-9]|error|Error" | tail -25
cp /tmp/fig8/summary.csv "$out/summary.csv"
tar czf "$out/fig8_run.tgz" -C /tmp fig8
