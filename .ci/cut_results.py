"""Delete what .dockerignore leaves out of the images under results/, so the fast loop
runs on the tree an image carries (CI's floor clone). Stdlib only: run before .venv exists.
Usage: python3 .ci/cut_results.py [ROOT]"""

import fnmatch
import shutil
import sys
from pathlib import Path


def rules(root: Path) -> list[str]:
    lines = (root / ".dockerignore").read_text().splitlines()
    return [x.strip() for x in lines if x.strip() and not x.startswith("#")]


def keeps(path: str, rules: list[str]) -> bool:
    """Whether Docker's build context keeps `path` under these rules (the last rule that
    matches the path or a folder above it decides; `!` keeps)."""
    kept = True
    parts = path.split("/")
    prefixes = ["/".join(parts[: k + 1]) for k in range(len(parts))]
    for rule in rules:
        pattern = rule.lstrip("!").rstrip("/")
        hit = any(
            fnmatch.fnmatchcase(p, pattern) and p.count("/") == pattern.count("/") for p in prefixes
        )
        if hit:
            kept = rule.startswith("!")
    return kept


def main(root: Path) -> None:
    found = rules(root)

    def kept(p: Path) -> bool:
        return keeps(p.relative_to(root).as_posix() + "/x", found)

    for top in sorted((root / "results").glob("*")):
        children = [c for c in sorted(top.glob("*")) if c.is_dir()] if top.is_dir() else []
        if not kept(top) and not any(map(kept, children)):
            shutil.rmtree(top) if top.is_dir() else top.unlink()
            continue
        for child in children:
            if not kept(child):
                shutil.rmtree(child)


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve())
