#!/usr/bin/env bash
# Build both images with buildah, then check what each holds: its torch is its base's
# (ROCm) or its lock's (CUDA), `pip check` is clean, and in each the test suite and the
# tiny `nox -s all` pass on CPU; in the CUDA one also lint, no compiler, another uid's
# HOME, and the preflight's refusal of a GPU run without a GPU. A maintainer's tool, not
# CI (it needs root, buildah and ~50 GB of disk: vfs storage copies whole root filesystems).
#
#   nice -n 10 bash requirements/check-image.sh [--no-cuda-wheels] [--stand-in] [--reuse] [--keep-stand-ins]
#
# Base images: the pinned ones where a registry answers; where none does (or with
# --stand-in), stand-ins made here: a Debian bookworm rootfs (debootstrap) with a CPython
# 3.11 in /usr/local (STANDIN_PYTHON, a prefix built on bookworm; by default pyenv's newest
# 3.11) in place of python:3.12-slim-bookworm, and the same plus g++, a uid-1000 user
# `ubuntu`, the base's torch (BASE_TORCH in Dockerfile.rocm, 2.10.0: PyPI's build, the only
# one of that version on PyPI, with its CUDA 12 packages; it runs on CPU here) in /opt/venv,
# and PyPI's amdsmi source as /opt/rocm/share/amd_smi in place of rocm/pytorch. The
# stand-ins prove the Dockerfiles' steps, not the real bases.
# --no-cuda-wheels: leave out torch's CUDA build and triton, nvidia-*, cuda-* (several GB)
# and install a CPU torch 2.13.0 wheel instead (TORCH_CPU_WHEEL=path, or found in pip's
# find-links folders), given to the build as a bind mount (buildah build --volume), not
# through the build context. --reuse: skip the builds and check the images a previous run
# left in $CHECK_IMAGE_DIR. --keep-stand-ins: build the images, but on the stand-in bases a
# previous run left there (their making takes minutes and the ROCm one ~4 GB of wheels).
# Needs: apt-get install -y buildah debootstrap. State: $CHECK_IMAGE_DIR (/var/tmp/overlap-check).
set -euo pipefail
cd "$(dirname "$0")/.."
no_cuda_wheels=0
stand_in=0
reuse=0
keep=0
for a in "$@"; do
  case $a in
    --no-cuda-wheels) no_cuda_wheels=1 ;;
    --stand-in) stand_in=1 ;;
    --reuse) reuse=1 ;;
    --keep-stand-ins) keep=1 ;;
    *) echo "unknown option $a; accepted: --no-cuda-wheels, --stand-in, --reuse, --keep-stand-ins" >&2; exit 2 ;;
  esac
done
work=${CHECK_IMAGE_DIR:-/var/tmp/overlap-check}
mkdir -p "$work"
# vfs and chroot: no overlay filesystem, no user namespaces, no container runtime needed
bh() { buildah --root "$work/storage" --runroot "$work/run" --storage-driver vfs "$@"; }
step() { printf '\n==> %s\n' "$*"; }
base_of() { sed -n 's/^ARG BASE_IMAGE=//p' "$1"; }
rocm_torch=$(sed -n 's/^ARG BASE_TORCH=//p' Dockerfile.rocm)
cuda_torch=$(sed -n 's/^torch==\([^ ]*\).*/\1/p' requirements/lock-cuda.txt)
find_wheel() {  # find_wheel PYTAG: a CPU torch 2.13.0 wheel, from TORCH_CPU_WHEEL or pip's find-links
  local d f
  [ -n "${TORCH_CPU_WHEEL:-}" ] && { echo "$TORCH_CPU_WHEEL"; return; }
  for d in ${PIP_FIND_LINKS:-} $(pip config get global.find-links 2>/dev/null || true) /opt/wheels; do
    for f in "$d"/torch-2.13.0+cpu-"$1"-"$1"-*linux*_x86_64.whl; do
      [ -f "$f" ] && { echo "$f"; return; }
    done
  done
  echo "no CPU torch 2.13.0 wheel for $1 in pip's find-links: set TORCH_CPU_WHEEL=PATH" >&2
  return 2
}

cuda_base=$(base_of Dockerfile.cuda)
rocm_base=$(base_of Dockerfile.rocm)
if [ "$reuse" = 1 ]; then
  step "reusing the images of a previous run"
  for kind in cuda rocm; do bh inspect --type image "overlap-artifact:$kind" >/dev/null; done
  stand_in=$(bh inspect --type image localhost/overlap-standin:cuda >/dev/null 2>&1 && echo 1 || echo 0)
elif [ "$keep" = 1 ]; then
  step "building on the stand-in bases a previous run left"
  for kind in cuda rocm; do bh inspect --type image "localhost/overlap-standin:$kind" >/dev/null; done
  stand_in=1
  pytag=cp311
  cuda_base=localhost/overlap-standin:cuda
  rocm_base=localhost/overlap-standin:rocm
elif [ "$stand_in" = 0 ] && timeout 300 bh pull -q "$cuda_base" >/dev/null 2>&1; then
  step "a registry answers: building on the pinned bases"
  pytag=cp312
else
  stand_in=1
  pytag=cp311
  step "no registry (or --stand-in): building on stand-in bases from Debian bookworm"
  rootfs=$work/rootfs
  if [ ! -x "$rootfs/usr/bin/apt-get" ]; then
    rm -rf "$rootfs"
    debootstrap --variant=minbase --include=ca-certificates bookworm "$rootfs" \
      http://deb.debian.org/debian >"$work/debootstrap.log"
  fi
  run=(bh run --isolation chroot)
  # python:3.12-slim-bookworm's place: CPython in /usr/local with venv and headers, no
  # compiler. Bookworm's own python3.11 (3.11.2) is older than the pins allow (some need
  # 3.11.5+), and the only CPU torch wheel at hand may be cp311: so a CPython 3.11.5+
  # built on bookworm (glibc 2.36) is copied in, by default pyenv's newest 3.11.
  py=${STANDIN_PYTHON:-$(ls -d "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.11.* 2>/dev/null | sort -V | tail -n 1)}
  [ -x "$py/bin/python3.11" ] || { echo "no CPython 3.11 prefix for the stand-in: set STANDIN_PYTHON=PREFIX" >&2; exit 2; }
  ctr=$(bh from scratch)
  bh copy "$ctr" "$rootfs" / >/dev/null
  # its stdlib only: the prefix's site-packages stays behind
  tar -C "$py" --exclude='./lib/python3.11/site-packages/*' --exclude='__pycache__' \
    -cf "$work/python.tar" ./bin/python3.11 ./lib ./include
  bh add "$ctr" "$work/python.tar" /usr/local/ >/dev/null
  # this machine may reach the registries through a TLS proxy with its own CA
  bh copy "$ctr" /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt >/dev/null
  bh config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --env LANG=C.UTF-8 --env PIP_CERT=/etc/ssl/certs/ca-certificates.crt \
    --cmd /bin/bash "$ctr"
  # the shared libraries CPython's modules link (python:slim has them too)
  "${run[@]}" "$ctr" -- sh -c 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -qq --no-install-recommends libssl3 libffi8 libsqlite3-0 libbz2-1.0 \
    liblzma5 libreadline8 libncursesw6 zlib1g libuuid1 libexpat1 libnsl2 libtirpc3 >/dev/null \
    && rm -rf /var/lib/apt/lists/* && ldconfig && ln -s python3.11 /usr/local/bin/python3 \
    && ln -s python3.11 /usr/local/bin/python \
    && python -c "import ssl, sqlite3, lzma, bz2, ctypes, venv, ensurepip; print(\"stand-in:\", __import__(\"sys\").version)"'
  bh commit -q "$ctr" localhost/overlap-standin:cuda >/dev/null
  bh rm "$ctr" >/dev/null
  cuda_base=localhost/overlap-standin:cuda
  # rocm/pytorch's place: Ubuntu's uid-1000 user, a compiler, the base's torch version in
  # /opt/venv with what it requires (PyPI has no CPU build of 2.10.0: its CUDA 12 build and
  # packages, ~4 GB, kept in $work/rocm-wheels), and ROCm's amdsmi Python source as
  # /opt/rocm/share/amd_smi (PyPI's sdist of it: the same code; no libamd_smi here).
  wheels=$work/rocm-wheels
  mkdir -p "$wheels"
  # the stand-in's own Python downloads: its tags are the stand-in's (same glibc, same CPython)
  "$py/bin/python3.11" -m pip download -q --only-binary=:all: "torch==$rocm_torch" -d "$wheels"
  "$py/bin/python3.11" -m pip download -q --no-deps --no-binary=:all: amdsmi==7.0.2 -d "$wheels"
  ctr=$(bh from "$cuda_base")
  "${run[@]}" --volume "$wheels:/tmp/w:ro" "$ctr" -- sh -c 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -qq --no-install-recommends g++ >/dev/null && rm -rf /var/lib/apt/lists/* \
    && useradd --create-home --uid 1000 ubuntu && python -m venv /opt/venv \
    && /opt/venv/bin/python -m pip install -q --no-index --find-links /tmp/w torch=='"$rocm_torch"' \
    && mkdir -p /opt/rocm/share/amd_smi && tar -xzf /tmp/w/amdsmi-7.0.2.tar.gz \
       --strip-components=1 -C /opt/rocm/share/amd_smi'
  bh commit -q "$ctr" localhost/overlap-standin:rocm >/dev/null
  bh rm "$ctr" >/dev/null
  rocm_base=localhost/overlap-standin:rocm
fi

cuda_args=()
if [ "$no_cuda_wheels" = 1 ] && [ "$reuse" = 0 ]; then
  wheel=$(find_wheel "$pytag")
  cuda_args=(--build-arg CUDA_WHEELS=0 --volume "$(dirname "$(realpath "$wheel")"):/tmp/cpu-wheels:ro")
fi
commit=$(git rev-parse HEAD 2>/dev/null || echo unknown)

for kind in cuda rocm; do
  [ "$reuse" = 1 ] && break
  base=${kind}_base
  step "building overlap-artifact:$kind on ${!base}"
  extra=()
  [ "$kind" = cuda ] && extra=("${cuda_args[@]}")
  start=$(date +%s)
  bh build --isolation chroot -q -f "Dockerfile.$kind" -t "overlap-artifact:$kind" \
    --build-arg BASE_IMAGE="${!base}" --build-arg GIT_COMMIT="$commit" "${extra[@]}" . \
    >"$work/build-$kind.log" 2>&1 || { tail -n 40 "$work/build-$kind.log"; exit 1; }
  echo "built in $(( $(date +%s) - start )) s; log: $work/build-$kind.log"
done

# Run a command as `docker run IMAGE CMD...` would: through the image's ENTRYPOINT, as
# its USER, in its WORKDIR (buildah run alone skips the entrypoint). $user overrides.
in_image() {  # in_image KIND [--user UID:GID] CMD...
  local kind=$1; shift
  local opts=()
  if [ "$1" = --user ]; then opts=(--user "$2"); shift 2; fi
  local ctr ep
  ctr=$(bh from "overlap-artifact:$kind")
  mapfile -t ep < <(bh inspect --type image "overlap-artifact:$kind" \
    | python3 -c 'import json, sys; print(*json.load(sys.stdin)["OCIv1"]["config"]["Entrypoint"], sep="\n")')
  [ "${#ep[@]}" -gt 0 ] || { echo "overlap-artifact:$kind has no ENTRYPOINT" >&2; return 1; }
  local rc=0
  # Docker puts the container's hostname in /etc/hosts; buildah run does not, and torch's
  # c10d store (torchrun, gloo) then hangs resolving it: name the container localhost.
  bh run --isolation chroot --hostname localhost "${opts[@]}" "$ctr" -- "${ep[@]}" "$@" || rc=$?
  bh rm "$ctr" >/dev/null
  return $rc
}

# The suites and tiny runs go on past a failure, so that one run reports both images;
# the script exits 1 at the end naming what failed.
failed=()
soft() {  # soft NAME CMD...: run CMD; a failure is remembered, not fatal
  local name=$1; shift
  "$@" || { echo "FAILED: $name" >&2; failed+=("$name"); }
}
# torch inside an image: its base's (ROCm), or its lock's (CUDA: the base has none)
torch_of() {  # torch_of IMAGE: the torch version inside IMAGE
  local ctr v
  ctr=$(bh from "$1")
  v=$(bh run --isolation chroot "$ctr" -- sh -c 'PATH=/opt/venv/bin:$PATH python -c "import torch; print(torch.__version__)"' | tail -n 1)
  bh rm "$ctr" >/dev/null
  echo "$v"
}
step "ROCm image: torch is the base's own (BASE_TORCH $rocm_torch)"
base_v=$(torch_of "$rocm_base")
image_v=$(torch_of overlap-artifact:rocm)
echo "base $rocm_base: torch $base_v; overlap-artifact:rocm: torch $image_v"
[ "$image_v" = "$base_v" ] && [ "${image_v%%+*}" = "$rocm_torch" ] || {
  echo "the ROCm image's torch $image_v is not its base's ($base_v) or not BASE_TORCH $rocm_torch" >&2; exit 1; }
step "ROCm image: uid 1000 is artifact (the base's own user made way); pip check; imports"
in_image rocm sh -c 'id && python requirements/pip_check.py --python 3.12 \
  && python -c "import importlib.metadata as m; d = m.distribution(\"amdsmi\"); print(\"amdsmi\", d.version, d.read_text(\"direct_url.json\"))" \
  && python -c "import artifact.launch.preflight, deepspeed.ops.comm.deepspeed_shm_comm_op; print(\"imports ok\")"'
step "ROCm image: nox -s tests -- -q (CPU, torch $rocm_torch)"
start=$(date +%s)
soft "ROCm tests" in_image rocm nox -s tests -- -q
echo "ROCm tests took $(( $(date +%s) - start )) s"
step "ROCm image: nox -s all -- --preset tiny (the CPU check, torch $rocm_torch)"
start=$(date +%s)
soft "ROCm tiny all" in_image rocm sh -c 'nox -s all -- --preset tiny && head -n 1 results/*-tiny/report/appendix.md'
echo "ROCm tiny all took $(( $(date +%s) - start )) s"
step "CUDA image: torch is the lock's ($cuda_torch; +cpu with --no-cuda-wheels); pip check"
image_v=$(torch_of overlap-artifact:cuda)
echo "overlap-artifact:cuda: torch $image_v"
[ "${image_v%%+*}" = "$cuda_torch" ] || { echo "the CUDA image's torch $image_v is not the lock's $cuda_torch" >&2; exit 1; }
in_image cuda python requirements/pip_check.py --python 3.12
step "CUDA image: the banner"
in_image cuda python -c "$(bh inspect --type image --format '{{index .OCIv1.Config.Cmd 2}}' overlap-artifact:cuda)"
step "CUDA image: no compiler at run time; another uid gets a HOME and a writable results/"
in_image cuda --user 4242:4242 sh -c 'for c in cc gcc g++ c++; do command -v $c && exit 1; done; \
  echo "no compiler"; echo "HOME=$HOME"; touch results/.w && rm results/.w && echo "results/ writable by uid $(id -u)"'
step "CUDA image: a GPU run without a GPU stops at the preflight (one line, exit 2)"
rc=0; in_image cuda nox -s all || rc=$?
[ "$rc" = 2 ] || { echo "expected exit 2, got $rc" >&2; exit 1; }
step "CUDA image: nox -s lint"
in_image cuda nox -s lint
step "CUDA image: nox -s tests -- -q (CPU)"
start=$(date +%s)
soft "CUDA tests" in_image cuda nox -s tests -- -q
echo "CUDA tests took $(( $(date +%s) - start )) s"
step "CUDA image: nox -s all -- --preset tiny (the CPU check)"
start=$(date +%s)
soft "CUDA tiny all" in_image cuda sh -c 'nox -s all -- --preset tiny && head -n 1 results/*-tiny/report/appendix.md' 
echo "CUDA tiny all took $(( $(date +%s) - start )) s"
kinds="stand-in bases"; [ "$stand_in" = 0 ] && kinds="pinned bases"
[ "$reuse" = 1 ] && kinds="$kinds, reused"
wheels="CUDA wheels"; [ "$no_cuda_wheels" = 1 ] && wheels="CPU torch instead of the CUDA wheels"
if [ "${#failed[@]}" -gt 0 ]; then
  step "FAILED: ${failed[*]} (both images built; torch $image_v (CUDA) and $base_v (ROCm); pip check clean)"
  exit 1
fi
step "OK: both images built ($kinds, $wheels); torch $image_v (CUDA) and $base_v (ROCm, its base's); pip check clean, tests and the tiny run pass in both, lint in the CUDA image"
echo "images: buildah --root $work/storage --storage-driver vfs images; remove: rm -rf $work"
