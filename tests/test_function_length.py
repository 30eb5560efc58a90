"""No function in artifact/ over 60 lines without its reason (docs/design.md section 6):
the reason is a line of its docstring or a comment in it saying "60 lines" or "on
purpose" (e.g. `# Over 60 lines: ...`)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MOST = 60
REASON = re.compile(r"60 lines|on purpose", re.I)


def long_without_reason(source: str, name: str) -> list[str]:
    lines = source.splitlines()
    out = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        length = node.end_lineno - node.lineno + 1
        body = "\n".join(lines[node.lineno - 1 : node.end_lineno])
        if length > MOST and not REASON.search(body):
            out.append(f"{name}:{node.lineno} {node.name} ({length} lines)")
    return out


def test_every_long_function_says_why():
    found = []
    for path in sorted((ROOT / "artifact").rglob("*.py")):
        found += long_without_reason(path.read_text(), str(path.relative_to(ROOT)))
    assert not found, "over 60 lines with no reason: " + "; ".join(found)


def test_a_long_function_without_its_reason_is_named():
    long = "def f():\n" + "    x = 1\n" * 61
    assert long_without_reason(long, "m.py") == ["m.py:1 f (62 lines)"]
    reasoned = "def f():\n    # Over 60 lines: a table.\n" + "    x = 1\n" * 60
    assert long_without_reason(reasoned, "m.py") == []
