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


def _managed_python(dest: Path) -> Path:
    """A copy of this interpreter (stdlib, pip, no other package) whose stdlib holds an
    EXTERNALLY-MANAGED marker, as Debian 12's and Ubuntu 24.04's python3 do."""
    base = Path(sys.base_prefix)
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    (dest / "bin").mkdir(parents=True)
    shutil.copy2(base / "bin" / version, dest / "bin" / "python3")
    skip = shutil.ignore_patterns("site-packages", "test", "__pycache__", "idlelib", "turtledemo")
    shutil.copytree(Path(sysconfig.get_path("stdlib", vars={"base": sys.base_prefix, "installed_base": sys.base_prefix})), dest / "lib" / version, ignore=skip)  # fmt: skip
    (dest / "lib" / version / "site-packages").mkdir()
    py = dest / "bin" / "python3"
    subprocess.run([py, "-m", "ensurepip", "--default-pip"], check=True, capture_output=True)
    (dest / "lib" / version / "EXTERNALLY-MANAGED").write_text(
        "[externally-managed]\nError=this Python is managed by the distribution\n"
    )
    return py


@pytest.mark.slow
@pytest.mark.skipif(
    not (ROOT / ".git").exists() or shutil.which("git") is None,
    reason="README's set-up starts from a git clone; this tree is not one (the images copy no .git)",
)
def test_readme_setup_works_under_pep_668_with_an_empty_home(tmp_path):
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    py = _managed_python(tmp_path / "python")
    home = tmp_path / "home"
    home.mkdir()
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTHON", "NOX"))
    }
    env |= {"HOME": str(home), "PATH": f"{py.parent}:/usr/bin:/bin"}
    # the marker is real: the old README line fails as it does on Debian 12
    old = subprocess.run(
        ["python3", "-m", "pip", "install", "nox==2026.10.20"],
        cwd=clone, env=env, capture_output=True, text=True,
    )  # fmt: skip
    assert old.returncode != 0 and "externally-managed-environment" in old.stderr + old.stdout
    res = subprocess.run(
        ["bash", "-c", readme_command("-l")],
        cwd=clone, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    listed = res.stdout + res.stderr
    for session in ("fig4", "fig8", "all", "plan", "report", "tests"):
        assert f"* {session}" in listed or f"- {session}" in listed, listed[-2000:]


def test_ci_runs_readmes_commands_literally():
    ci = (ROOT / ".ci" / "run").read_text()
    assert readme_command("-s all") in ci
    assert readme_command("-s tests") in ci
