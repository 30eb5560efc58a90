#!/usr/bin/env bash
# Run experiments on a lent GPU within one device call, resumably (read-only: no clocks
# or limits are changed). Finished repetitions come back in OUT_DIR/records.tgz; carry
# that file into the next call as RESUME_TGZ and the run continues where it stopped.
# Usage, from the repository root: bash benchmarks/gpu_resume.sh OUT_DIR SECONDS EXPERIMENT...
set -uo pipefail
out=${1:?out dir}; seconds=${2:?seconds}; shift 2
export PYTHONUNBUFFERED=1 PYTHONPATH=${PYTHONPATH:+$PYTHONPATH:}.
run=/tmp/run
mkdir -p "$out" "$run"
[ -n "${RESUME_TGZ:-}" ] && tar xzf "$RESUME_TGZ" -C "$run"
end=$(( $(date +%s) + seconds ))
for exp in "$@"; do
  left=$(( end - $(date +%s) ))
  [ "$left" -le 10 ] && { echo "$exp: no time left"; continue; }
  timeout "$left" python3 -m artifact run "$exp" --out "$run" --allow-mixed > "$out/$exp.log" 2>&1
  echo "$exp exit $?"
done
python3 -m artifact summarize "$run" --allow-mixed > /dev/null 2>&1
cp "$run/summary.csv" "$run/configs.json" "$out/" 2>/dev/null
tar czf "$out/records.tgz" -C "$run" records
