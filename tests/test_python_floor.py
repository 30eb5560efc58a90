"""The oldest Python pyproject allows is the oldest a supported distribution ships
(Debian 12: 3.11.2; Ubuntu 24.04 ships 3.12.3), and the source uses nothing newer.

ruff's target-version (py311) checks syntax; this checks the standard library calls that
arrived later than 3.11.2, which no linter knows: it parses every Python file of the
tree (ast) and names each call the floor lacks.
"""

import ast
import re
from pathlib import Path

from tests.conftest import ROOT

FLOOR = (3, 11, 2)

# keyword arguments the floor's standard library lacks, by the method they go to
NEWER_KEYWORDS = {
    ("extractall", "filter"): "3.11.4",  # tarfile's extraction filters
    ("extract", "filter"): "3.11.4",
    ("rmtree", "onexc"): "3.12",
    ("relative_to", "walk_up"): "3.12",
    ("glob", "case_sensitive"): "3.12",
    ("rglob", "case_sensitive"): "3.12",
    ("NamedTemporaryFile", "delete_on_close"): "3.12",
}
# functions and attributes the floor lacks, by the module (or object) they are read from
NEWER_ATTRIBUTES = {
    ("itertools", "batched"): "3.12",
    ("tarfile", "data_filter"): "3.11.4",
    ("tarfile", "fully_trusted_filter"): "3.11.4",
    ("typing", "override"): "3.12",
    ("calendar", "Month"): "3.12",
}
NEWER_IMPORTS = {("typing", "override"): "3.12", ("itertools", "batched"): "3.12"}
SOURCES = ("artifact", "benchmarks", "tests")  # and the top-level *.py (noxfile.py)


def python_files(root: Path) -> list[Path]:
    return sorted(root.glob("*.py")) + sorted(p for d in SOURCES for p in (root / d).rglob("*.py"))


def newer_than_floor(source: str, name: str = "<source>") -> list[str]:
    """'file:line: call (Python X)' for each call in `source` that the floor lacks."""
    found = []
    for node in ast.walk(ast.parse(source, name)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            for kw in node.keywords:
                since = NEWER_KEYWORDS.get((node.func.attr, kw.arg))
                if since:
                    found.append(f"{name}:{node.lineno}: {node.func.attr}({kw.arg}=...) (Python {since})")  # fmt: skip
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            since = NEWER_ATTRIBUTES.get((node.value.id, node.attr))
            if since:
                found.append(f"{name}:{node.lineno}: {node.value.id}.{node.attr} (Python {since})")
        if isinstance(node, ast.ImportFrom) and node.module:
            for a in node.names:
                since = NEWER_IMPORTS.get((node.module, a.name))
                if since:
                    found.append(f"{name}:{node.lineno}: from {node.module} import {a.name} (Python {since})")  # fmt: skip
    return found


def test_the_tree_uses_nothing_newer_than_the_floor():
    files = python_files(ROOT)
    assert len(files) > 100  # the tree was walked: artifact/, tests/, benchmarks/, noxfile.py
    assert ROOT / "noxfile.py" in files
    found = [hit for p in files for hit in newer_than_floor(p.read_text(), str(p.relative_to(ROOT)))]  # fmt: skip
    assert found == [], "calls Python 3.11.2 lacks:\n" + "\n".join(found)


def test_the_check_can_fail():
    src = (
        "import tarfile, itertools, shutil\n"
        "from typing import override\n"
        "with tarfile.open('a.tgz') as t:\n"
        "    t.extractall('out', filter='data')\n"
        "    t.extract('m', 'out', filter=tarfile.data_filter)\n"
        "shutil.rmtree('x', onexc=print)\n"
        "list(itertools.batched([1, 2], 1))\n"
        "t.extractall('out', members=t.getmembers())\n"  # fine on the floor
    )
    found = newer_than_floor(src, "x.py")
    assert {f.split(": ", 1)[1] for f in found} == {
        "from typing import override (Python 3.12)",
        "extractall(filter=...) (Python 3.11.4)",
        "extract(filter=...) (Python 3.11.4)",
        "tarfile.data_filter (Python 3.11.4)",
        "rmtree(onexc=...) (Python 3.12)",
        "itertools.batched (Python 3.12)",
    }


def test_pyproject_states_the_floor():
    """requires-python is the floor this file checks against: Debian 12's 3.11.2."""
    text = (ROOT / "pyproject.toml").read_text()
    (spec,) = re.findall(r'^requires-python = "(.*)"$', text, re.M)
    assert spec == ">=" + ".".join(map(str, FLOOR))
