#!/usr/bin/env bash
# One device call: benchmarks/ranks_per_gpu_probe.py with NCCL 2.32.3 preloaded
# (build/dev/nccl, benchmarks/device_pack.sh nccl), 2 and 4 ranks on one GPU, first
# time-sliced (no MPS), then under an MPS control daemon of its own (pipe and log folders
# under /tmp/mps; no GPU setting changed), which it stops after.
# Usage, from the repository root: bash benchmarks/gpu_ranks_probe.sh OUT
set -uo pipefail
out=${1:?out}; mkdir -p "$out" /tmp/nccl
xz -d -T0 -c build/dev/nccl/libnccl.xz > /tmp/nccl/libnccl.so.2
export LD_PRELOAD=/tmp/nccl/libnccl.so.2 NCCL_MULTI_RANK_GPU_ENABLE=1 NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,compute_mode,power.limit --format=csv | tee "$out/gpu.txt"
command -v nvidia-cuda-mps-control || echo "no nvidia-cuda-mps-control"
probe() {  # LABEL K
  local s=$(date +%s)
  timeout 60 torchrun --standalone --nproc-per-node "$2" benchmarks/ranks_per_gpu_probe.py --per-gpu "$2" \
    > "$out/$1.json" 2> "$out/$1.err"
  echo "$1: exit $? after $(( $(date +%s) - s )) s"; cat "$out/$1.json"; tail -n 4 "$out/$1.err"
}
probe nomps-k2 2
probe nomps-k4 4
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps/pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps/log
mkdir -p /tmp/mps/pipe /tmp/mps/log
if nvidia-cuda-mps-control -d; then
  probe mps-k4 4
  echo quit | nvidia-cuda-mps-control; sleep 2
  tail -n 5 /tmp/mps/log/control.log
else echo "MPS daemon did not start"; fi
