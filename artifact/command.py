"""The CLI as a command a user can paste (messages that say what to run next)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path


def invocation() -> str:
    """This CLI as a command to paste: the `artifact` script beside this interpreter
    (pyproject's [project.scripts]), `.venv/bin/artifact` (relative where it lies under the
    current folder), or bare `artifact` where that is the first on PATH; without the
    script (the images run the tree from PYTHONPATH), `python -m artifact` where that
    `python` is this one, else this interpreter's path: another Python may lack the packages."""
    exe = Path(sys.executable)
    script = exe.parent / "artifact"
    if script.is_file():
        on_path = shutil.which("artifact")
        if on_path and Path(on_path).absolute() == script.absolute():
            return "artifact"
        return str(script.relative_to(Path.cwd()) if script.is_relative_to(Path.cwd()) else script)
    on_path = shutil.which("python")
    if on_path and Path(on_path).absolute() == exe.absolute():
        return "python -m artifact"
    if exe.is_relative_to(Path.cwd()):
        exe = exe.relative_to(Path.cwd())
    return f"{exe} -m artifact"
