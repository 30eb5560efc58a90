"""README's set-up line, as a reviewer runs it: a fresh clone, a distribution's python3
that refuses `pip install` outside a virtual environment (PEP 668), an empty HOME."""

import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from tests.conftest import ROOT


def readme_command(session: str) -> str:
    """README's main command with `-s all` replaced by `session` (e.g. '-l')."""
    text = (ROOT / "README.md").read_text()
    (line,) = [m.strip() for m in re.findall(r"^    (python3 -m venv .*nox -s all)$", text, re.M)]
    return line.replace("-s all", session)


DISTRIBUTION_PYTHON = Path("/usr/bin/python3")


def is_externally_managed(py: Path) -> bool:
    """Whether `py`'s standard library holds the PEP 668 marker (Debian 12, Ubuntu 24.04)."""
    res = subprocess.run(
        [py, "-c", "import sysconfig, pathlib; "
         "print(pathlib.Path(sysconfig.get_path('stdlib'), 'EXTERNALLY-MANAGED').is_file())"],
        capture_output=True, text=True,
    )  # fmt: skip
    return res.stdout.strip() == "True"


def _copied_python(dest: Path) -> Path:
    """Where the machine has no distribution python3: a copy of this interpreter (stdlib,
    and pip copied from this environment; no ensurepip, which Debian disables for its
    system Python) whose stdlib holds an EXTERNALLY-MANAGED marker."""
    import pip

    base = Path(sys.base_prefix)
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    (dest / "bin").mkdir(parents=True)
    shutil.copy2(base / "bin" / version, dest / "bin" / "python3")
    skip = shutil.ignore_patterns("site-packages", "test", "__pycache__", "idlelib", "turtledemo")
    shutil.copytree(Path(sysconfig.get_path("stdlib", vars={"base": sys.base_prefix, "installed_base": sys.base_prefix})), dest / "lib" / version, ignore=skip)  # fmt: skip
    shutil.copytree(Path(pip.__file__).parent, dest / "lib" / version / "site-packages" / "pip")
    (dest / "lib" / version / "EXTERNALLY-MANAGED").write_text(
        "[externally-managed]\nError=this Python is managed by the distribution\n"
    )
    return dest / "bin" / "python3"


def managed_python(dest: Path) -> Path:
    """The python3 a user of a distribution has: /usr/bin/python3 where it carries the
    PEP 668 marker (as on Debian 12, 3.11.2: the suite's floor), else a marked copy."""
    if DISTRIBUTION_PYTHON.is_file() and is_externally_managed(DISTRIBUTION_PYTHON):
        return DISTRIBUTION_PYTHON
    return _copied_python(dest)


def readme_plan_line() -> str:
    """README's plan command (the light session: no torch)."""
    text = (ROOT / "README.md").read_text()
    lines = re.findall(r"^    (\.nox-venv/bin/nox -s plan -- .*)$", text, re.M)
    assert lines, "README shows no `.nox-venv/bin/nox -s plan -- ...` line"
    return lines[0].strip()


@pytest.mark.slow
@pytest.mark.skipif(
    not (ROOT / ".git").exists() or shutil.which("git") is None,
    reason="README's set-up starts from a git clone; this tree is not one (the images copy no .git)",
)
def test_readme_setup_works_under_pep_668_with_an_empty_home(tmp_path):
    """README's set-up line (with `-l`), then README's plan line, in a fresh clone, as a
    user of the distribution's python3 runs them: the venv is made by that interpreter."""
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    py = managed_python(tmp_path / "python")
    assert is_externally_managed(py)
    home = tmp_path / "home"
    home.mkdir()
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTHON", "NOX"))
    }
    env |= {"HOME": str(home), "PATH": f"{py.parent}:/usr/bin:/bin"}
    # the marker is real: a bare pip install fails as it does on Debian 12
    old = subprocess.run(
        ["python3", "-m", "pip", "install", "nox==2026.10.20"],
        cwd=clone, env=env, capture_output=True, text=True,
    )  # fmt: skip
    assert old.returncode != 0
    if "No module named pip" not in old.stderr:  # a distribution python3 without python3-pip
        assert "externally-managed-environment" in old.stderr + old.stdout
    res = subprocess.run(
        ["bash", "-c", readme_command("-l")],
        cwd=clone, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    listed = res.stdout + res.stderr
    for session in ("fig4", "fig8", "all", "plan", "report", "tests"):
        assert f"* {session}" in listed or f"- {session}" in listed, listed[-2000:]
    made_by = (clone / ".nox-venv" / "pyvenv.cfg").read_text()
    assert f"home = {py.parent}" in made_by  # the interpreter under test made the venv
    # README's plan line: the light environment, no torch, no .venv
    res = subprocess.run(
        ["bash", "-c", readme_plan_line()],
        cwd=clone, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    assert "total: " in res.stdout
    assert not (clone / ".venv").exists()
    assert not list((clone / ".venv-plan").glob("lib/python3*/site-packages/torch"))


def test_ci_runs_readmes_commands_literally():
    ci = (ROOT / ".ci" / "run").read_text()
    assert readme_command("-s all") in ci
    assert readme_command("-s tests") in ci


def test_ci_runs_the_fast_loop_under_the_distribution_python():
    """Where /usr/bin/python3 is not the python3 CI runs README's lines with, CI runs the
    fast loop under it too, in a venv it made (Debian 12's 3.11.2 is the floor)."""
    ci = (ROOT / ".ci" / "run").read_text()
    step = ci[ci.index('if [ -x /usr/bin/python3 ] && [ "$(command -v python3)"') :]
    assert "/usr/bin/python3 -m venv .nox-venv" in step
    assert '.nox-venv/bin/nox -s tests -- -m "not slow"' in step


def test_readme_calls_the_cli_one_way():
    """`.venv/bin/artifact` wherever README names the CLI: a bare `python -m artifact` is
    `python: command not found` on Debian, and `python3 -m artifact` lacks the packages."""
    import tomllib

    from artifact.cli import build_parser

    text = (ROOT / "README.md").read_text()
    assert re.findall(r"python3? -m artifact", text) == []
    used = set(re.findall(r"\.venv/bin/artifact (?:--debug )?([a-z][a-z-]*)", text))
    commands = set(build_parser()._subparsers._group_actions[0].choices)
    assert {"run", "plan", "summarize", "restore-caps"} <= used <= commands
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["artifact"] == "artifact.entry:main"  # registry errors: one line
