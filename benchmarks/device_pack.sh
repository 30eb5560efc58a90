#!/usr/bin/env bash
# Fill build/dev/ for benchmarks/gpu_mechanisms.sh: the committed source (git archive HEAD,
# results/ left out), the wheels a lent GPU machine lacks (benchmarks/device_wheels.sh),
# and, with `nccl`, NCCL 2.32.3 slimmed to one GPU architecture (benchmarks/slim_nccl.py).
# Usage, from the repository root: bash benchmarks/device_pack.sh [nccl [SM]]
# COMMIT=abc1234 packs that commit's source instead of HEAD: a results folder resumes only
# at the commit it was measured at (its README names it). RESUME="NAME=DIR ..." packs each
# results folder DIR as build/dev/resume/NAME.tgz, which the step writing NAME resumes.
set -euo pipefail
dev=build/dev; mkdir -p "$dev"
git diff --quiet HEAD -- artifact benchmarks || echo "warning: uncommitted changes are not packed"
git archive --format=tar.gz -o "$dev/src.tgz" "${COMMIT:-HEAD}" -- . ':(exclude)results'
[ -d "$dev/whl" ] || { bash benchmarks/device_wheels.sh && mv .whl "$dev/whl"; }
if [ "${1:-}" = nccl ] && [ ! -f "$dev/nccl/libnccl.xz" ]; then
  tmp=$(mktemp -d)
  python3 -m pip download -q --no-deps --only-binary=:all: --platform manylinux_2_27_x86_64 \
    -d "$tmp" "nvidia-nccl-cu13==2.32.3"
  unzip -q -o "$tmp"/nvidia_nccl_cu13-*.whl 'nvidia/nccl/lib/libnccl.so.2' -d "$tmp"
  mkdir -p "$dev/nccl"
  python3 benchmarks/slim_nccl.py "$tmp/nvidia/nccl/lib/libnccl.so.2" "$tmp/slim.so" "${2:-90}"
  sha256sum < "$tmp/slim.so" | cut -d' ' -f1 > "$dev/nccl/sha256"
  xz -9 -T0 -c "$tmp/slim.so" > "$dev/nccl/libnccl.xz"; rm -rf "$tmp"
fi
for pair in ${RESUME:-}; do
  mkdir -p "$dev/resume"
  tar czf "$dev/resume/${pair%%=*}.tgz" -C "${pair#*=}" --exclude=./README.md --exclude=./report \
    --exclude=./summary.csv --exclude=./verdicts.csv .
done
du -sh "$dev"/*
