# Sourced by the device-call scripts (gpu_rehearsal.sh, gpu_waves.sh), from the repository
# root, with $out set: the carried wheels (.whl/) into /tmp/site, NCCL 2.32.3
# (build/dev/nccl/libnccl.xz, checked against its sha256) to /tmp/nccl/libnccl.so.2, and
# the committed source (build/dev/src.tgz, `git archive`: the records name its commit)
# unpacked to /tmp/src, else the tree itself. Sets here (the tree) and src, cds to src.
here=$PWD
mkdir -p "$out" /tmp/nccl
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site "$here"/.whl/*.whl > "$out/pip.log" 2>&1
if [ ! -f /tmp/nccl/libnccl.so.2 ]; then
  xz -d -T0 -c "$here/build/dev/nccl/libnccl.xz" > /tmp/nccl/libnccl.so.2
  [ "$(sha256sum < /tmp/nccl/libnccl.so.2 | cut -d' ' -f1)" = "$(cat "$here/build/dev/nccl/sha256")" ] \
    || { echo "libnccl does not match its sha256"; rm -f /tmp/nccl/libnccl.so.2; }
fi
src=$PWD
if [ -f build/dev/src.tgz ]; then
  rm -rf /tmp/src && mkdir -p /tmp/src && tar xzf build/dev/src.tgz -C /tmp/src && src=/tmp/src
  grep -o '"[0-9a-f]\{40\}"' /tmp/src/artifact/_commit.py | head -n 1
fi
cd "$src" || exit 1
export PYTHONPATH=/tmp/site:$src PYTHONUNBUFFERED=1
