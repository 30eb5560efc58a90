#!/usr/bin/env bash
# Co-located NCCL ranks need NCCL 2.30 or newer; a lent GPU machine's torch loads 2.28.
# nvidia-nccl-cu13's libnccl.so.2 is 344 MB (268 MB as xz), more than one device call may
# carry (64 MiB with the working tree), so it travels in parts, one a call, while the
# machine stays warm (30 s between calls), and is put back together there.
#
#   here:  bash benchmarks/device_nccl.sh split [MB]   # parts build/nccl1 ... build/ncclN (default 55 MB)
#          then, call k: carry ["build/ncclk"] (and move the other parts out of build/:
#          the tool counts what it sends), command `bash benchmarks/device_nccl.sh keep k`
#   there: bash benchmarks/device_nccl.sh join         # /tmp/nccl/libnccl.so.2, checked
#          export LD_PRELOAD=/tmp/nccl/libnccl.so.2    # then artifact.rank.colocate sees 2.32.3
# The tracked tree (results/ is most of it) travels with every call: `git ls-files -z |
# xargs -0 stat -c %s` sums it; the parts must fit beside it.
set -euo pipefail
version=2.32.3
case "${1:?split, keep K or join}" in
  split)
    mb=${2:-55}
    tmp=$(mktemp -d)
    python3 -m pip download -q --no-deps --only-binary=:all: --platform manylinux_2_27_x86_64 \
      -d "$tmp" "nvidia-nccl-cu13==$version"
    unzip -q -o "$tmp"/nvidia_nccl_cu13-*.whl 'nvidia/nccl/lib/libnccl.so.2' -d "$tmp"
    xz -9 -T0 -c "$tmp/nvidia/nccl/lib/libnccl.so.2" > "$tmp/libnccl.xz"
    sha256sum "$tmp/libnccl.xz" | cut -d' ' -f1 > "$tmp/sha256"
    rm -rf build/nccl*; mkdir -p build
    split -b "${mb}000000" -d -a 1 "$tmp/libnccl.xz" "$tmp/part_"
    k=1; for p in "$tmp"/part_*; do mkdir -p "build/nccl$k"; mv "$p" "build/nccl$k/p"; k=$((k + 1)); done
    cp "$tmp/sha256" build/nccl1/sha256
    ls -l build/nccl*/p; rm -rf "$tmp" ;;
  keep)
    mkdir -p /tmp/ncclparts; cp "build/nccl$2/p" "/tmp/ncclparts/$2"
    [ -f build/nccl1/sha256 ] && cp build/nccl1/sha256 /tmp/ncclparts/sha256 || true
    ls -l /tmp/ncclparts ;;
  join)
    parts=$(ls /tmp/ncclparts | grep -E '^[0-9]+$' | sort -n | sed 's#^#/tmp/ncclparts/#')
    got=$(cat $parts | sha256sum | cut -d' ' -f1)
    [ "$got" = "$(cat /tmp/ncclparts/sha256)" ] || { echo "parts do not match: $got"; exit 2; }
    mkdir -p /tmp/nccl; cat $parts | xz -d -T0 > /tmp/nccl/libnccl.so.2
    ls -l /tmp/nccl/libnccl.so.2 ;;
esac
