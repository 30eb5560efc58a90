"""The Dockerfiles' own checks, run here: the x86_64 refusal, pip check for the locks' Python, what the context lets in."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCKERFILES = ("Dockerfile.cuda", "Dockerfile.rocm")


def _run_line(dockerfile: str, needle: str) -> str:
    """The shell command of the RUN instruction holding `needle` (one line)."""
    for line in (ROOT / dockerfile).read_text().splitlines():
        if line.startswith("RUN ") and needle in line:
            return line[4:]
    raise AssertionError(f"{dockerfile}: no RUN line with {needle!r}")


@pytest.mark.parametrize("dockerfile", DOCKERFILES)
@pytest.mark.parametrize(("machine", "rc"), [("x86_64", 0), ("aarch64", 2)])
def test_the_build_stops_in_one_line_off_x86_64(tmp_path, dockerfile, machine, rc):
    fake = tmp_path / "uname"
    fake.write_text(f"#!/bin/sh\necho {machine}\n")
    fake.chmod(0o755)
    env = {**os.environ, "PATH": f"{tmp_path}:/usr/bin:/bin"}
    cmd = _run_line(dockerfile, "uname -m")
    p = subprocess.run(["/bin/sh", "-c", cmd], env=env, capture_output=True, text=True)
    assert p.returncode == rc
    if rc:
        assert p.stderr.splitlines() == [
            "overlap-artifact images are x86_64 only; this build runs on aarch64 "
            "(see docs/docker.md)"
        ]
    # first: before any install
    text = (ROOT / dockerfile).read_text()
    first_install = min(i for i in (text.find("apt-get"), text.find("pip install")) if i >= 0)
    assert text.index("uname -m") < first_install


def test_both_images_run_pip_check_for_the_python_the_locks_are_for():
    locks_for = re.search(
        r"--python-version (\d+\.\d+)", (ROOT / "requirements/lock.sh").read_text()
    )
    for name in DOCKERFILES:
        text = (ROOT / name).read_text()
        assert f"requirements/pip_check.py --python {locks_for.group(1)}" in text, name
        assert text.index("pip_check.py --python") > text.rindex("pip install"), name


def _pip_check(tmp_path, python):
    dist = tmp_path / "site" / "fakea-1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: fakea\nVersion: 1.0\n"
        'Requires-Dist: fakeb; python_version < "3.12"\n'
        'Requires-Dist: fakec>=2; python_version >= "3.12"\n'
    )
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "site")}
    p = subprocess.run(
        [sys.executable, str(ROOT / "requirements/pip_check.py"), "--python", python],
        env=env,
        capture_output=True,
        text=True,
    )
    return p.returncode, [
        line for line in p.stdout.splitlines() if "fake" in line or "markers" in line
    ]


def test_pip_check_judges_requirements_with_the_locks_python(tmp_path):
    here = f"{sys.version_info.major}.{sys.version_info.minor}"
    target = "3.12" if here != "3.12" else "3.11"
    rc, lines = _pip_check(tmp_path, target)
    missing = "fakec" if target == "3.12" else "fakeb"
    assert rc == 1
    assert lines[0].endswith(f"requirements judged with Python {target}'s markers")
    assert lines[1:] == [f"fakea 1.0 requires {missing}, which is not installed."]


def test_pip_check_is_plain_pip_check_on_the_locks_python(tmp_path):
    here = f"{sys.version_info.major}.{sys.version_info.minor}"
    rc, lines = _pip_check(tmp_path, here)
    missing = "fakec" if sys.version_info >= (3, 12) else "fakeb"
    assert rc == 1 and lines == [f"fakea 1.0 requires {missing}, which is not installed."]


def test_a_bad_python_is_refused(tmp_path):
    p = subprocess.run(
        [sys.executable, str(ROOT / "requirements/pip_check.py"), "--python", "3"],
        capture_output=True,
        text=True,
    )
    assert p.returncode == 2 and "expected MAJOR.MINOR" in p.stderr


def test_the_build_context_keeps_wheels_out():
    patterns = (ROOT / ".dockerignore").read_text().splitlines()
    assert "**/*.whl" in patterns and "*.whl" in patterns
    assert not any(p.startswith("!") and p.endswith(".whl") for p in patterns)
