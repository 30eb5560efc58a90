#!/usr/bin/env bash
# One device call of the one-GPU mechanism run (read-only on the GPU), resumable: the
# stand-in probe, the contention map's mechanism axis at 1 GiB with n = 5 (co-located NCCL
# rows where benchmarks/device_nccl.sh has joined a newer NCCL), then fig4 and fig10 as
# rank 0 of 4 with each stand-in, each resumed from .resume/NAME.tgz and back as OUT/NAME.tgz.
# Usage, from the repository root: bash benchmarks/gpu_mechanisms.sh OUT_DIR SECONDS
set -uo pipefail
out=${1:?out dir}; seconds=${2:?seconds}; start=$(date +%s)
left() { echo $(( seconds - ($(date +%s) - start) )); }
mkdir -p "$out" /tmp/site
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl > "$out/pip.log" 2>&1
export PYTHONPATH=/tmp/site:. PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
[ -f /tmp/nccl/libnccl.so.2 ] && export LD_PRELOAD=/tmp/nccl/libnccl.so.2
run() {  # NAME TIMEOUT ARGS...: python -m artifact run ARGS --out /tmp/NAME, resumed and packed
  local name=$1 t=$2; shift 2
  mkdir -p "/tmp/$name"; [ -f ".resume/$name.tgz" ] && tar xzf ".resume/$name.tgz" -C "/tmp/$name"
  timeout "$t" python3 -m artifact run "$@" --out "/tmp/$name" > "$out/$name.log" 2>&1
  echo "$name exit $? after $(( $(date +%s) - start )) s"
  tar czf "$out/$name.tgz" -C "/tmp/$name" --exclude='./traces/*/*.json' .
}
[ -f .resume/standin_probe.json ] || timeout 150 python3 benchmarks/standin_probe.py --colocate > "$out/standin_probe.json" 2> "$out/probe.err"
run mech "$(( $(left) - 20 ))" contention --preset quick --comm-mib 1024 --precision bf16 --reps 5
for s in nccl-shaped copy; do
  [ "$(left)" -gt 60 ] && run "e4-$s" "$(( $(left) - 20 ))" fig4 --preset quick --emulate-world 4 --stand-in "$s" --parallelisms fsdp
  [ "$(left)" -gt 60 ] && run "e4-$s" "$(( $(left) - 20 ))" fig10 --preset quick --emulate-world 4 --stand-in "$s"
done
