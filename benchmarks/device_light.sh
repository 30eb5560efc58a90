#!/usr/bin/env bash
# The tracked tree travels with every device call (64 MiB with what the call carries), and
# results/ is most of it (61 MiB of 61.4). `hide` takes results/ out of git's index and
# ignores it for one call, so the call carries only the source and its wheels; `restore`
# puts the index back from HEAD (the files on disk are never touched). Run `restore` after
# every call, before any commit.
# Usage, from the repository root: bash benchmarks/device_light.sh hide|restore
set -euo pipefail
exclude=.git/info/exclude
case "${1:?hide or restore}" in
  hide) mkdir -p .git/info; touch "$exclude"; git rm -r -q --cached results
        grep -qx '/results/' "$exclude" || echo '/results/' >> "$exclude" ;;
  restore) sed -i '\#^/results/$#d' "$exclude"
           git reset -q -- results ;;
esac
git ls-files -z | xargs -0 stat -c %s | awk '{s+=$1} END {printf "tracked: %.1f MiB\n", s/1048576}'
