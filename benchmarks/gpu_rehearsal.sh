#!/usr/bin/env bash
# One device call (read-only on the GPU): the carried wheels (.whl/) and NCCL 2.32.3
# (build/dev/nccl, benchmarks/device_pack.sh nccl) installed, then the steps named, each
# bounded by what is left of SECONDS:
#   probe      benchmarks/gpu_ranks_probe.sh: 2 and 4 NCCL ranks on one GPU, without and with MPS
#   figs       `run FIG` for each of FIGS (default fig8 fig4) at preset rehearsal with
#              --ranks-per-gpu 4, after the emulated reference of REF_FIGS' FSDP rows
#   rehearsal  README's `nox -s rehearsal` (python -m artifact rehearsal), REHEARSAL_ARGS
# Results come back as OUT/NAME.tgz (profiler traces left out). A call resumes the last
# call's folder where it is carried as .resume/NAME.tgz (its finished runs are kept).
# Usage, from the repository root: bash benchmarks/gpu_rehearsal.sh OUT SECONDS STEP...
set -uo pipefail
out=${1:?out}; seconds=${2:?seconds}; shift 2; start=$(date +%s)
left() { echo $(( seconds - ($(date +%s) - start) )); }
source benchmarks/device_prep.sh
for step in "$@"; do  # resume: the last call's folder, where carried
  [ -f "$here/.resume/$step.tgz" ] && mkdir -p "/tmp/$step" && tar xzf "$here/.resume/$step.tgz" -C "/tmp/$step" \
    && echo "$step: resumed from the carried .resume/$step.tgz"
done
export PATH=/tmp/site/bin:$PATH
pack() { tar czf "$out/$1.tgz" -C "/tmp/$1" --exclude='./traces/*/*.json' --exclude='./reference/traces/*/*.json' . ; }
for step in "$@"; do
  [ "$(left)" -gt 60 ] || { echo "no time left for $step"; break; }
  case $step in
    probe) (cd "$here" && bash benchmarks/gpu_ranks_probe.sh "$out/probe") ;;
    figs) for fig in ${REF_FIGS:-}; do  # their FSDP rows' reference: rank 0 of 4, emulated
            timeout "$(( $(left) - 20 ))" python3 -m artifact run "$fig" --preset rehearsal \
              --emulate-world 4 --parallelisms fsdp --fsdp-impl deepspeed,fsdp2 --reps 1 \
              --only-applicable --out /tmp/figs/reference >> "$out/figs.log" 2>&1
            echo "figs: reference $fig exit $? after $(( $(date +%s) - start )) s"
          done
          for fig in ${FIGS:-fig8 fig4}; do
            [ "$(left)" -gt 40 ] || { echo "figs: no time left for $fig"; break; }
            LD_PRELOAD=/tmp/nccl/libnccl.so.2 timeout "$(( $(left) - 20 ))" python3 -m artifact run "$fig" \
              --preset rehearsal --ranks-per-gpu 4 --fsdp-impl deepspeed,fsdp2 --only-applicable \
              --hang-timeout-s 90 --out /tmp/figs >> "$out/figs.log" 2>&1
            echo "figs: $fig exit $? after $(( $(date +%s) - start )) s"
          done; pack figs ;;
    rehearsal) if [ -z "${REHEARSAL_MPS:-}" ] && [ -f "$out/probe/nomps-k4.json" ]; then
            # the probe decides: time-sliced where 4 ranks ran without MPS, else MPS
            [ -s "$out/probe/nomps-k4.json" ] && REHEARSAL_MPS=off || REHEARSAL_MPS=on
          fi
          echo "rehearsal: --mps ${REHEARSAL_MPS:-off}"
          LD_PRELOAD=/tmp/nccl/libnccl.so.2 timeout "$(( $(left) - 20 ))" python3 -m artifact rehearsal \
              --mps "${REHEARSAL_MPS:-off}" ${REHEARSAL_ARGS:-} --out /tmp/rehearsal >> "$out/rehearsal.log" 2>&1
          echo "rehearsal exit $? after $(( $(date +%s) - start )) s"; tail -n 40 "$out/rehearsal.log"; pack rehearsal ;;
    *) echo "unknown step $step (accepted: probe, figs, rehearsal)"; exit 2 ;;
  esac
done
