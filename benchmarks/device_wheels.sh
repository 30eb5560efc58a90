#!/usr/bin/env bash
# Fill .whl/ with what a lent GPU machine lacks (its image has torch, NCCL, nvidia-ml-py,
# pandas, scipy, matplotlib; Python 3.12): DeepSpeed, Megatron-core, nox and rich, and
# their dependencies, at lock-cuda.txt's versions. DeepSpeed is a source distribution:
# its wheel is built here (pure Python; its ops build on first use there).
# Usage, from the repository root: bash benchmarks/device_wheels.sh
set -euo pipefail
mkdir -p .whl
pin() { grep -hE "^$1==" requirements/lock-cuda.txt requirements/lock-deepspeed.txt | sed "s/ .*//" | head -n 1; }
names="megatron-core nox rich hjson ninja py-cpuinfo pydantic pydantic-core annotated-types
typing-inspection msgpack einops argcomplete colorlog dependency-groups distlib virtualenv
python-discovery platformdirs filelock attrs humanize markdown-it-py mdurl pygments
typing-extensions packaging pyyaml"
pins=$(for n in $names; do pin "$n"; done)
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
  --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 --platform any -d .whl $pins 2>&1 | { grep -v "is ignored" || true; }
[ -n "$(ls .whl/deepspeed-*.whl 2>/dev/null)" ] ||
  .venv/bin/python -m pip wheel -q --no-deps --no-build-isolation -w .whl "$(pin deepspeed)"
du -sh .whl
