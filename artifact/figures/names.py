"""The registry's names and order, read from this folder's file names alone.

Kept free of imports beyond the standard library: noxfile.py loads this file by path to
make one session per figure before any environment (pandas, torch) exists.
"""

from __future__ import annotations

import re
from pathlib import Path

HERE = Path(__file__).resolve().parent
NOT_FIGURES = frozenset({"__init__", "spec", "derived", "names", "sweeps"})


def _order(name: str) -> tuple:
    """The paper's figures by number (fig4 ... fig11), then the extra experiments by name."""
    m = re.fullmatch(r"fig(\d+)", name)
    return (0, int(m.group(1)), "") if m else (1, 0, name)


def figure_names(folder: Path = HERE) -> list[str]:
    return sorted((p.stem for p in folder.glob("*.py") if p.stem not in NOT_FIGURES), key=_order)


def figure_title(name: str, folder: Path = HERE) -> str:
    """The first line of a figure file's docstring ("Fig. 5: end-to-end ..."), parsed, not
    imported; and, for a figure drawn from another's records, which experiment runs."""
    import ast

    source = (folder / f"{name}.py").read_text()
    title = (ast.get_docstring(ast.parse(source)) or name).splitlines()[0].rstrip(".")
    drawn = re.search(r'records_of="(\w+)"', source)
    return (
        f"{title}; runs {drawn.group(1)}'s experiment, whose records it reads" if drawn else title
    )
