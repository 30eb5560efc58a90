#!/usr/bin/env bash
# README's main command at quick on one GPU as one uninterrupted run across device calls
# (read-only on the GPU): `start` launches `python -m artifact all --preset quick` (what
# `nox -s all` runs on a GPU; torch's own NCCL, nothing preloaded, as a user has it) in a
# process session of its own (setsid), so it outlives the call while the machine is held;
# `wait` waits for it. Each call waits at most SECONDS, then returns the log, the progress
# and the folder so far as OUT/quick.tgz (profiler traces left out); the last one returns
# it finished. Chain the calls at once: the machine goes back after 30 s idle.
# Usage, from the repository root: bash benchmarks/gpu_quick.sh OUT SECONDS start|wait
set -uo pipefail
out=${1:?out}; seconds=${2:?seconds}; what=${3:?start or wait}; start=$(date +%s)
run=/tmp/quick
log=$run.logs/all.log
mkdir -p "$out"
source benchmarks/device_background.sh
if [ "$what" = start ]; then  # `wait` leaves /tmp/src and /tmp/site alone: the run reads them
  source benchmarks/device_prep.sh
  background_start "$log" python3 -m artifact all --preset quick --out "$run"
fi
background_wait "$log" "$seconds" "$start" && echo "finished: $(grep -c . "$log") log lines"
cp "$log" "$out/all.log"
tail -n 25 "$out/all.log"
tar czf "$out/quick.tgz" -C "$run" --exclude='./traces/*/*.json' . 2> /dev/null
