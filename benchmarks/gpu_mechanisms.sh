#!/usr/bin/env bash
# One device call of the one-GPU mechanism run (read-only on the GPU), resumable.
# It runs the committed source, not the working copy: build/dev/src.tgz is `git archive
# HEAD` (artifact/_commit.py stamped with the commit, results/ left out), unpacked to /tmp/src.
# Steps, in order, as many as SECONDS allow:
#   probe            benchmarks/standin_probe.py --colocate (correctness, pace, block sweep)
#   mech             the contention map's mechanism axis at 1 GiB, bf16, n = 5
#   fig4:STAND_IN, fig10:STAND_IN   fig4 (FSDP rows) or fig10 at quick as rank 0 of 4, with
#                    --stand-in copy or nccl-shaped (into one folder a stand-in: e4-STAND_IN)
#   all              README's main command at quick (`python -m artifact all --preset quick`,
#                    what `nox -s all` runs), into the folder quick; resumed like the others
# Each run's folder stays in /tmp/NAME while the machine is warm, else it is resumed from
# build/dev/resume/NAME.tgz; it comes back as OUT/NAME.tgz (profiler traces left out). A
# folder resumes only at the commit it was measured at: a run refuses another's folder.
# A newer NCCL (co-located ranks need 2.30+): build/dev/nccl/libnccl.xz, see
# benchmarks/slim_nccl.py; preloaded where present, for probe and mech only.
# Here:  git archive HEAD -o build/dev/src.tgz ... (benchmarks/device_pack.sh does it all)
# Usage, from the repository root: bash benchmarks/gpu_mechanisms.sh OUT SECONDS STEP...
set -uo pipefail
out=${1:?out dir}; seconds=${2:?seconds}; shift 2; start=$(date +%s); dev=$PWD/build/dev
left() { echo $(( seconds - ($(date +%s) - start) )); }
mkdir -p "$out"
if [ ! -d /tmp/site ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site "$dev"/whl/*.whl > "$out/pip.log" 2>&1
fi
rm -rf /tmp/src && mkdir -p /tmp/src && tar xzf "$dev/src.tgz" -C /tmp/src
if [ ! -f /tmp/nccl/libnccl.so.2 ] && [ -f "$dev/nccl/libnccl.xz" ]; then
  mkdir -p /tmp/nccl && xz -d -T0 -c "$dev/nccl/libnccl.xz" > /tmp/nccl/libnccl.so.2
  [ "$(sha256sum < /tmp/nccl/libnccl.so.2 | cut -d' ' -f1)" = "$(cat "$dev/nccl/sha256")" ] || { echo "libnccl does not match its sha256"; rm -f /tmp/nccl/libnccl.so.2; }
fi
cd /tmp/src || exit 1
grep -o '"[0-9a-f]\{40\}"' artifact/_commit.py | head -n 1
export PYTHONPATH=/tmp/site:/tmp/src PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
# the newer NCCL only where ranks co-locate (probe, mech); the figures run torch's own, as a user's do
pre=; [ -f /tmp/nccl/libnccl.so.2 ] && pre=/tmp/nccl/libnccl.so.2
run() {  # NAME TIMEOUT VERB ARGS...: python -m artifact VERB ARGS --out /tmp/NAME, resumed, packed
  local name=$1 t=$2 verb=$3; shift 3
  [ -d "/tmp/$name" ] || { mkdir -p "/tmp/$name"; [ -f "$dev/resume/$name.tgz" ] && tar xzf "$dev/resume/$name.tgz" -C "/tmp/$name"; }
  timeout "$t" python3 -m artifact "$verb" "$@" --out "/tmp/$name" >> "$out/$name.log" 2>&1
  local rc=$?
  echo "$name ($*) exit $rc after $(( $(date +%s) - start )) s"
  for _ in $(seq 20); do pgrep -f "artifact $verb" > /dev/null || break; sleep 1; done
  tar czf "$out/$name.tgz" -C "/tmp/$name" --exclude='./traces/*/*.json' .
  return $rc
}
for step in "$@"; do
  [ "$(left)" -gt 60 ] || { echo "no time left for $step"; break; }
  done=/tmp/done-${step//:/-}  # a step that ended with exit 0 on this warm machine is not rerun
  [ -f "$done" ] && { echo "$step: done in an earlier call"; continue; }
  case $step in
    probe) LD_PRELOAD=$pre timeout "$(( $(left) - 10 ))" python3 benchmarks/standin_probe.py --colocate > "$out/standin_probe.json" 2> "$out/probe.err"
           echo "probe exit $? after $(( $(date +%s) - start )) s"; tail -n 5 "$out/probe.err" ;;
    mech) LD_PRELOAD=$pre run mech "$(( $(left) - 25 ))" run contention --preset quick --comm-mib 1024 --precision bf16 --reps 5 ;;
    fig4:*|fig10:*) fig=${step%%:*}; s=${step#*:}; extra=(); [ "$fig" = fig4 ] && extra=(--parallelisms fsdp)
          run "e4-$s" "$(( $(left) - 25 ))" run "$fig" --preset quick --emulate-world 4 --stand-in "$s" "${extra[@]}" ;;
    all) run quick "$(( $(left) - 25 ))" all --preset quick ;;
    *) echo "unknown step $step (accepted: probe, mech, all, FIG:STAND_IN for fig4 or fig10)"; exit 2 ;;
  esac && touch "$done"
done
