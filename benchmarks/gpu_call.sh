#!/usr/bin/env bash
# One device call on a lent GPU (read-only: no clocks, limits or modes are changed):
# install the carried wheels (.whl/), then optional benchmarks, then README's main command
# (`nox -s all`, quick) resumed from .resume/run.tgz until the call's time is up.
# Usage, from the repository root: bash benchmarks/gpu_call.sh OUT_DIR SECONDS [bench]
set -uo pipefail
out=${1:?out dir}; seconds=${2:?seconds}; bench=${3:-}
start=$(date +%s)
mkdir -p "$out" /tmp/site
pip install -q --no-deps --target /tmp/site .whl/*.whl > "$out/pip.log" 2>&1
export PYTHONPATH=/tmp/site:. PYTHONUNBUFFERED=1
if [ "$bench" = largest ]; then
  # the largest FSDP configuration the plan's estimate puts within one H200 (139.8 GiB)
  timeout 200 python3 benchmarks/fsdp_mfu.py --impls deepspeed --model gpt3-6.7b --seq 2048 \
    --micro-batch 8 --recompute --iters 2 --warmup 1 > "$out/largest.json" 2> "$out/bench.err"
  tail -c 3000 "$out/bench.err" > "$out/bench_tail.err"; rm -f "$out/bench.err"
  echo "largest done after $(( $(date +%s) - start )) s"
fi
if [ "$bench" = bench ]; then
  # FSDP MFU at the quick preset's shape, three processes in a row: ZeRO-3 (one leaf a
  # block) and FSDP2 each time, so the matmul peak's calibration (peak_tflops before the
  # trainers, peak_tflops_after them) is seen three times; then per-submodule ZeRO-3
  mfu() { timeout 150 python3 benchmarks/fsdp_mfu.py --iters 8 --warmup 3 "$@" 2>> "$out/bench.err"; }
  for k in 1 2 3; do mfu --impls deepspeed,fsdp2 > "$out/mfu_$k.json"; done
  mfu --impls deepspeed --z3-leaf none > "$out/mfu_leaf_none.json"
  tail -c 3000 "$out/bench.err" > "$out/bench_tail.err"; rm -f "$out/bench.err"
  echo "benchmarks done after $(( $(date +%s) - start )) s"
fi
left=$(( seconds - ($(date +%s) - start) ))
if [ "$left" -gt 30 ]; then
  bash benchmarks/gpu_all.sh "$out/all" "$left" $( [ -f .resume/run.tgz ] && echo .resume/run.tgz )
fi
