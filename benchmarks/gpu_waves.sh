#!/usr/bin/env bash
# One device call (read-only on the GPU): the contention map's mitigation and order axes at
# 1 GiB, bf16, n = 5, beside co-located NCCL ranks (W = COLOCATE, default 4), NCCL 2.32.3
# preloaded (build/dev/nccl), the committed source (build/dev/src.tgz, `git archive`).
# First what this torch binds of NCCL's config (the CTA policy's field) and whether it has
# the SM carve-out; then `run contention --axes AXIS` for each of AXES (default
# "mitigation order"), each into its own folder, back as OUT/AXIS.tgz (traces left out),
# with one overlap trace cut to its kernels as OUT/AXIS-kernels.json.gz (a test fixture).
# Usage, from the repository root: bash benchmarks/gpu_waves.sh OUT SECONDS
set -uo pipefail
out=${1:?out}; seconds=${2:?seconds}; start=$(date +%s)
left() { echo $(( seconds - ($(date +%s) - start) )); }
source benchmarks/device_prep.sh
export NCCL_NVLS_ENABLE=0 LD_PRELOAD=/tmp/nccl/libnccl.so.2
python3 - <<'PY' | tee "$out/binds.txt"
import torch, torch.distributed as dist
c = dist.ProcessGroupNCCL.Options().config
print("torch", torch.__version__, "nccl", torch.cuda.nccl.version())
print("config fields:", [f for f in dir(c) if not f.startswith("_")])
print("carve-out:", hasattr(torch._C, "_set_sm_carveout_experimental"))
PY
for axis in ${AXES:-mitigation order}; do
  [ "$(left)" -gt 60 ] || { echo "no time left for $axis"; break; }
  timeout "$(( $(left) - 25 ))" python3 -m artifact run contention --preset quick --comm-mib 1024 \
    --precision bf16 --reps 5 --axes "$axis" --colocate "${COLOCATE:-4}" --out "/tmp/$axis" > "$out/$axis.log" 2>&1
  echo "$axis exit $? after $(( $(date +%s) - start )) s"; tail -n 4 "$out/$axis.log"
  python3 - "$axis" "$out" <<'PY'
import glob, gzip, json, sys
axis, out = sys.argv[1:]
paths = sorted(glob.glob(f"/tmp/{axis}/traces/contention/*overlap*.json"))
if paths:
    t = json.load(open(paths[0]))
    keep = [e for e in t["traceEvents"] if e.get("cat") == "kernel"]
    cut = {"traceEvents": keep, "deviceProperties": t.get("deviceProperties", []), "source": paths[0].split("/")[-1]}
    with gzip.open(f"{out}/{axis}-kernels.json.gz", "wt") as f:
        json.dump(cut, f)
PY
  tar czf "$out/$axis.tgz" -C "/tmp/$axis" --exclude='./traces/*/*.json' .
done
