#!/usr/bin/env bash
# One device call on a lent GPU (read-only: no clocks, limits or modes are changed):
# install the carried wheels (.whl/), then optional benchmarks, then README's main command
# (`nox -s all`, quick) resumed from .resume/run.tgz until the call's time is up.
# Usage, from the repository root: bash benchmarks/gpu_call.sh OUT_DIR SECONDS ["bench ..."]
# (bench, one or more of: order: what sequential's stream ordering costs a collective
# (benchmarks/ordering_cost.py, about a minute); largest, bench, or memory: the paper preset's memory table at W = 4, which takes
# the call; carry the last call's emulated_memory.json in .resume/ and it goes on from there;
# or emulate: EMULATE_FIGURES (default fig4 fig10) at quick as rank 0 of 4 for at most
# EMULATE_S seconds, resumed from .resume/e4.tgz, back as OUT/e4/run.tgz)
# The main run's figures and flags: MAIN_FIGURES and MAIN_ARGS (default: nox -s all), resumed
# from .resume/run.tgz, back as OUT/all/run.tgz.
# (SECONDS at most the call's limit less 30 s: a stopped run takes up to 20 s to write its status)
set -uo pipefail
out=${1:?out dir}; seconds=${2:?seconds}; bench=${3:-}
start=$(date +%s)
has() { [[ " $bench " == *" $1 "* ]]; }
mkdir -p "$out" /tmp/site
pip install -q --no-deps --target /tmp/site .whl/*.whl > "$out/pip.log" 2>&1
export PYTHONPATH=/tmp/site:. PYTHONUNBUFFERED=1
if has order; then
  timeout 150 python3 benchmarks/ordering_cost.py > "$out/ordering.json" 2> "$out/ordering.err"
  echo "order exit $? after $(( $(date +%s) - start )) s"; tail -n 3 "$out/ordering.err"
fi
if has largest; then
  # the largest FSDP configuration the plan's estimate puts within one H200 (139.8 GiB)
  timeout 200 python3 benchmarks/fsdp_mfu.py --impls deepspeed --model gpt3-6.7b --seq 2048 \
    --micro-batch 8 --recompute --iters 2 --warmup 1 > "$out/largest.json" 2> "$out/bench.err"
  tail -c 3000 "$out/bench.err" > "$out/bench_tail.err"; rm -f "$out/bench.err"
  echo "largest done after $(( $(date +%s) - start )) s"
fi
if has memory; then
  # rank 0's peak at W = 4 beside the estimate, smallest estimate first, each configuration
  # in a process of its own (benchmarks/emulated_memory.py); stops 20 s before its timeout
  [ -f .resume/emulated_memory.json ] && cp .resume/emulated_memory.json "$out/"
  n=$(( seconds - ($(date +%s) - start) - 10 ))
  timeout "$n" python3 benchmarks/emulated_memory.py --preset paper --world 4 \
    --out "$out/emulated_memory.json" --seconds $(( n - 20 )) > "$out/memory.log" 2>&1
  echo "memory exit $? after $(( $(date +%s) - start )) s"; tail -n 25 "$out/memory.log"
fi
if has bench; then
  b=$out/bench; mkdir -p "$b"  # comes back as one bench.tgz (a call returns 8 files at most)
  # MFU's denominator: the matmul peak window by window beside NVML's clock, power and
  # temperature (benchmarks/peak_probe.py); then FSDP MFU at the quick preset's shape,
  # one process a line, each calibrating the peak before (peak_tflops) and after
  # (peak_tflops_after) its trainers; the first also profiles 3 steps of each (where
  # ZeRO-3's host time goes)
  timeout 60 python3 benchmarks/peak_probe.py --seconds 6 > "$b/peak_probe.json" 2>> "$b/bench.err"
  mfu() { timeout 150 python3 benchmarks/fsdp_mfu.py --iters 8 --warmup 3 "$@" 2>> "$b/bench.err"; }
  mfu --impls deepspeed,fsdp2 --trace "$b/trace" > "$b/mfu_1.json"
  # ZeRO-3's leaves picked by DeepSpeed's stage3_module_granularity_threshold (the same
  # blocks, plus its fast leaf sharding: no event wait a fetch), against the named blocks;
  # each counts one step's host-device synchronisations by call site
  mfu --impls deepspeed --z3-leaf threshold --sync-sites > "$b/mfu_thr_1.json"
  mfu --impls deepspeed --sync-sites > "$b/mfu_blk_1.json"
  mfu --impls deepspeed,fsdp2 > "$b/mfu_2.json"
  mfu --impls deepspeed --z3-leaf threshold > "$b/mfu_thr_2.json"
  # twice the work a step: if ZeRO-3's gap is host time a step (its backward hooks), its
  # MFU rises with the micro-batch more than FSDP2's
  mfu --impls deepspeed,fsdp2 --micro-batch 16 > "$b/mfu_mb16.json"
  mfu --impls deepspeed --z3-leaf threshold --micro-batch 16 > "$b/mfu_thr_mb16.json"
  tail -c 3000 "$b/bench.err" > "$b/bench_tail.err"; rm -f "$b/bench.err"
  tar czf "$out/bench.tgz" -C "$out" bench && rm -rf "$b"
  echo "benchmarks done after $(( $(date +%s) - start )) s"
fi
if has emulate; then
  left=$(( seconds - ($(date +%s) - start) )); n=${EMULATE_S:-$left}; [ "$n" -gt "$left" ] && n=$left
  FIGURES="${EMULATE_FIGURES:-fig4 fig10}" RUN_ARGS="--emulate-world 4" \
    bash benchmarks/gpu_all.sh "$out/e4" "$n" $( [ -f .resume/e4.tgz ] && echo .resume/e4.tgz )
fi
left=$(( seconds - ($(date +%s) - start) ))
if [ "$left" -gt 30 ]; then
  FIGURES="${MAIN_FIGURES:-}" RUN_ARGS="${MAIN_ARGS:-}" \
    bash benchmarks/gpu_all.sh "$out/all" "$left" $( [ -f .resume/run.tgz ] && echo .resume/run.tgz )
fi
