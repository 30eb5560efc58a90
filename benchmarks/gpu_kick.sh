#!/usr/bin/env bash
# README's "kick the tires" on one GPU, then the same two figures with 2 NCCL ranks sharing
# the GPU (--ranks-per-gpu 2, NCCL 2.32.3 preloaded), as one run across device calls
# (read-only on the GPU): the launcher-to-rank path end to end where a full quick does not
# fit the device time left. `start` launches it in a process session of its own (setsid);
# `wait` waits for it. Each call waits at most SECONDS, then returns the logs and the two
# folders so far as OUT/kick.tgz (profiler traces left out). Chain the calls at once: the
# machine goes back after 30 s idle.
# Usage, from the repository root: bash benchmarks/gpu_kick.sh OUT SECONDS start|wait
# (ONE=fig8 runs fig8 alone on one rank, where the device time left is short)
set -uo pipefail
out=${1:?out}; seconds=${2:?seconds}; what=${3:?start or wait}; start=$(date +%s)
run=/tmp/kick
log=$run.logs/kick.log
mkdir -p "$out"
source benchmarks/device_background.sh
if [ "$what" = start ]; then
  source benchmarks/device_prep.sh
  steps='
    for fig in '"${ONE:-fig8 fig4}"'; do python3 -m artifact run $fig --preset quick --out '"$run"'/one; echo "$fig exit $?"; done
    python3 -m artifact compare '"$run"'/one; python3 -m artifact report '"$run"'/one; echo "report exit $?"
    export NCCL_NVLS_ENABLE=0 LD_PRELOAD=/tmp/nccl/libnccl.so.2
    for fig in fig8 fig4; do
      python3 -m artifact run $fig --preset quick --ranks-per-gpu 2 --reps 2 --out '"$run"'/shared
      echo "$fig shared exit $?"
    done'
  background_start "$log" bash -c "$steps"
fi
background_wait "$log" "$seconds" "$start" && echo "finished"
cp "$log" "$out/kick.log"
grep -E "exit|error|Error" "$out/kick.log" | tail -n 20
tar czf "$out/kick.tgz" -C "$run" --exclude='./*/traces/*/*.json' . 2> /dev/null
