"""Calibration and reference data are package data: `plan` and `report` work with no
results/ folder, and from a wheel installed outside the checkout."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

COMMITTED_RUN = ROOT / "results" / "h200x1" / "session7" / "quick"
PAPER_PLAN = ("plan", "--preset", "paper", "--gpus", "4", "--gpu-memory-gib", "80")


def paper_total() -> str:
    """The paper plan's total line as this checkout prices it (the registry's figures)."""
    from artifact.core.config import get_preset
    from artifact.estimate.model import build, figures_of, totals

    t = totals(build(get_preset("paper"), figures_of([]), 4, 80.0))
    assert t["configurations"] > t["fit"] > 0
    return f"total: {t['configurations']} configurations, {t['fit']} fit 80 GiB per GPU"


def _artifact(cwd: Path, path: Path, *args: str) -> subprocess.CompletedProcess:
    code = (
        f"import sys; sys.path.insert(0, {str(path)!r}); import artifact, runpy; "
        f"assert artifact.__file__.startswith({str(path)!r}), artifact.__file__; "
        "sys.argv = ['artifact', *sys.argv[1:]]; runpy.run_module('artifact', run_name='__main__')"
    )
    return subprocess.run(
        [sys.executable, "-c", code, *args], cwd=cwd, capture_output=True, text=True, timeout=300
    )


@pytest.mark.slow  # over 1.5 s on 2 cores (a CLI process, or a long simulation)
def test_plan_and_report_without_results(tmp_path):
    """A checkout whose results/ is gone (a user starting clean), and a committed run
    copied elsewhere: plan prices the paper preset and report writes the appendix."""
    repo = tmp_path / "checkout"
    skip = shutil.ignore_patterns(".venv", ".nox-venv", ".git", "results", "__pycache__")
    shutil.copytree(ROOT, repo, ignore=skip)
    assert not (repo / "results").exists()
    plan = _artifact(repo, repo, *PAPER_PLAN)
    assert plan.returncode == 0, plan.stderr
    assert paper_total() in plan.stdout
    run = tmp_path / "elsewhere" / "quick"
    shutil.copytree(COMMITTED_RUN, run, ignore=shutil.ignore_patterns("report"))
    report = _artifact(repo, repo, "report", str(run))
    assert report.returncode == 0, report.stderr[-2000:]
    md = (run / "report" / "appendix.md").read_text()
    assert "paused 1 time(s)" in md and "started 2 times (resumed)" in md  # fig6 of session 7


@pytest.mark.slow
def test_a_wheel_installed_elsewhere_plans_the_paper_preset(tmp_path):
    wheels = tmp_path / "wheels"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
         "-w", str(wheels), str(ROOT)],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    (wheel,) = wheels.glob("overlap_artifact-*.whl")
    site = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site), str(wheel)],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    assert (site / "artifact" / "data" / "reference.json").is_file()
    res = _artifact(tmp_path, site, *PAPER_PLAN)
    assert res.returncode == 0, res.stderr
    assert paper_total() in res.stdout
