#!/usr/bin/env bash
# Build both images with buildah, then run the CPU checks inside the CUDA one: the test
# suite, the lint session, the tiny `nox -s all`, and the preflight's refusal of a GPU run
# without a GPU. A maintainer's tool, not CI (it needs root, buildah and ~20 GB of disk).
#
#   nice -n 10 bash requirements/check-image.sh [--no-cuda-wheels] [--stand-in] [--reuse]
#
# Base images: the pinned ones where a registry answers; where none does (or with
# --stand-in), stand-ins made here: a Debian bookworm rootfs (debootstrap) with a CPython
# 3.11 in /usr/local (STANDIN_PYTHON, a prefix built on bookworm; by default pyenv's newest
# 3.11) in place of python:3.12-slim-bookworm, and the same plus g++, a uid-1000 user
# `ubuntu` and a /opt/venv holding CPU torch in place of rocm/pytorch. The stand-ins prove
# the Dockerfiles' steps, not the real bases.
# --no-cuda-wheels: leave out torch's CUDA build and triton, nvidia-*, cuda-* (several GB)
# and install a CPU torch 2.13.0 wheel instead (TORCH_CPU_WHEEL=path, or found in pip's
# find-links folders); the ROCm stand-in always holds CPU torch. --reuse: skip the builds
# and check the images a previous run left in $CHECK_IMAGE_DIR.
# Needs: apt-get install -y buildah debootstrap. State: $CHECK_IMAGE_DIR (/var/tmp/overlap-check).
set -euo pipefail
cd "$(dirname "$0")/.."
no_cuda_wheels=0
stand_in=0
reuse=0
for a in "$@"; do
  case $a in
    --no-cuda-wheels) no_cuda_wheels=1 ;;
    --stand-in) stand_in=1 ;;
    --reuse) reuse=1 ;;
    *) echo "unknown option $a; accepted: --no-cuda-wheels, --stand-in, --reuse" >&2; exit 2 ;;
  esac
done
work=${CHECK_IMAGE_DIR:-/var/tmp/overlap-check}
mkdir -p "$work"
# vfs and chroot: no overlay filesystem, no user namespaces, no container runtime needed
bh() { buildah --root "$work/storage" --runroot "$work/run" --storage-driver vfs "$@"; }
step() { printf '\n==> %s\n' "$*"; }
base_of() { sed -n 's/^ARG BASE_IMAGE=//p' "$1"; }
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
  # rocm/pytorch's place: Ubuntu's uid-1000 user, a compiler, torch in /opt/venv
  wheel=$(find_wheel "$pytag")
  ctr=$(bh from "$cuda_base")
  bh copy "$ctr" "$wheel" /tmp/ >/dev/null
  "${run[@]}" "$ctr" -- sh -c 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -qq --no-install-recommends g++ >/dev/null && rm -rf /var/lib/apt/lists/* \
    && useradd --create-home --uid 1000 ubuntu && python -m venv /opt/venv \
    && /opt/venv/bin/python -m pip install -q --no-deps /tmp/torch-*.whl && rm /tmp/torch-*.whl'
  bh commit -q "$ctr" localhost/overlap-standin:rocm >/dev/null
  bh rm "$ctr" >/dev/null
  rocm_base=localhost/overlap-standin:rocm
fi

cuda_args=()
rm -f requirements/wheels/*.whl
if [ "$no_cuda_wheels" = 1 ] && [ "$reuse" = 0 ]; then
  wheel=$(find_wheel "$pytag")
  cp -l "$wheel" requirements/wheels/ 2>/dev/null || cp "$wheel" requirements/wheels/
  cuda_args=(--build-arg CUDA_WHEELS=0)
fi
trap 'rm -f requirements/wheels/*.whl' EXIT
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

step "ROCm image: the artifact user holds uid 1000 (the base's own user made way); imports"
in_image rocm sh -c 'id; python -c "import artifact.run.preflight, deepspeed.ops.comm.deepspeed_shm_comm_op; print(\"imports ok\")"'
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
step "CUDA image: nox -s tests -- -x -q (CPU)"
start=$(date +%s)
in_image cuda nox -s tests -- -x -q
echo "tests took $(( $(date +%s) - start )) s"
step "CUDA image: nox -s all -- --preset tiny (the CPU check)"
start=$(date +%s)
in_image cuda sh -c 'nox -s all -- --preset tiny && head -n 1 results/*-tiny/report/appendix.md' 
echo "tiny all took $(( $(date +%s) - start )) s"
kinds="stand-in bases"; [ "$stand_in" = 0 ] && kinds="pinned bases"
[ "$reuse" = 1 ] && kinds="$kinds, reused"
wheels="CUDA wheels"; [ "$no_cuda_wheels" = 1 ] && wheels="CPU torch instead of the CUDA wheels"
step "OK: both images built ($kinds, $wheels); tests, lint and the tiny run pass in the CUDA image"
echo "images: buildah --root $work/storage --storage-driver vfs images; remove: rm -rf $work"
