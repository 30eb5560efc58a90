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
  # FSDP MFU at the quick preset's shape: ZeRO-3 hooked per submodule (DeepSpeed's
  # default) and per block (the artifact's), FSDP2; then per block with recomputation
  mfu() { timeout 150 python3 benchmarks/fsdp_mfu.py --iters 8 --warmup 3 "$@" 2>> "$out/bench.err"; }
  mfu --impls deepspeed --z3-leaf none > "$out/mfu_leaf_none.json"
  mfu --impls deepspeed,fsdp2 --z3-leaf block > "$out/mfu_leaf_block.json"
  mfu --impls deepspeed,fsdp2 --z3-leaf block --recompute > "$out/mfu_leaf_block_rc.json"
  tail -c 3000 "$out/bench.err" > "$out/bench_tail.err"; rm -f "$out/bench.err"
  echo "benchmarks done after $(( $(date +%s) - start )) s"
fi
left=$(( seconds - ($(date +%s) - start) ))
if [ "$left" -gt 30 ]; then
  bash benchmarks/gpu_all.sh "$out/all" "$left" $( [ -f .resume/run.tgz ] && echo .resume/run.tgz )
fi
