#!/usr/bin/env bash
# README's main command (`nox -s all`, quick defaults) on a lent GPU, resumable across
# device calls of at most 10 minutes. The run folder comes back as OUT_DIR/run.tgz
# (without the profiler traces); hand it to the next call as RESUME_TGZ and nox -s all
# resumes it: finished repetitions are kept, the rest run. Read-only on the GPU.
# Usage, from the repository root: bash benchmarks/gpu_all.sh OUT_DIR SECONDS [RESUME_TGZ]
# With FIGURES="fig4 fig6 ..." it runs those figures alone, one `python -m artifact run FIG
# --preset ${PRESET:-quick} $RUN_ARGS` each (summarize, compare and report are left to the CPU).
set -uo pipefail
out=${1:?out dir}; seconds=${2:?seconds}; resume=${3:-}
figures=${FIGURES:-}; run_args=${RUN_ARGS:-}
run=/tmp/run-$(basename "$out")
mkdir -p "$out" "$run"
[ -n "$resume" ] && tar xzf "$resume" -C "$run"
export ARTIFACT_SYSTEM_PYTHON=1 PYTHONUNBUFFERED=1
start=$(date +%s)
if [ -z "$figures" ]; then
  timeout "$seconds" python3 -m nox -s all -- --out "$run" > "$out/nox.log" 2>&1
  echo "nox -s all exit $? after $(( $(date +%s) - start )) s"
else
  # one timeout over the figures; each line says how its figure ended, as nox's do
  timeout "$seconds" bash -c 'for f in $1; do s=$(date +%s); python3 -m artifact run "$f" --preset "${PRESET:-quick}" --out "$0" $2; echo "nox > $f: exit $? after $(( $(date +%s) - s )) s"; done' \
    "$run" "$figures" "$run_args" > "$out/nox.log" 2>&1
  echo "figures ($figures; $run_args) exit $? after $(( $(date +%s) - start )) s"
fi
# timeout signals its process group; nox exits at once, while the CLI still stops its
# ranks and writes the figure's 'interrupted' status: wait for it before packing the folder
# (`python -m artifact all` runs the figures in its own process: it is in the pattern)
for _ in $(seq 20); do pgrep -f "artifact (all|run|summarize|compare|report)" > /dev/null || break; sleep 1; done
grep -a "nox > " "$out/nox.log" | tail -n 20
gzip -f "$out/nox.log"
tar czf "$out/run.tgz" -C "$run" --exclude='./traces/*/*.json' .
