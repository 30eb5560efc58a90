"""Bad input at the nox level and at --out: one line that names the bad value and what is
accepted, and exit 2 (nox's own words and exit 3, or mkdir's "File exists", said neither)."""

import os
import subprocess
import sys

import pytest

from artifact.cli import main
from artifact.core.errors import ArtifactError
from artifact.store import check_not_a_file
from tests.conftest import ROOT


def _nox(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "NOXSESSION"}
    return subprocess.run(
        [sys.executable, "-m", "nox", "-f", str(ROOT / "noxfile.py"), *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def _error_lines(text: str) -> list[str]:
    """The lines that are not nox's own progress ("nox > ...")."""
    return [line for line in text.splitlines() if line and not line.startswith("nox >")]


def test_an_unknown_session_is_one_line_listing_the_sessions():
    res = _nox("-s", "fig44")
    assert res.returncode == 2, res.stdout + res.stderr
    (line,) = _error_lines(res.stderr)
    assert line.startswith("nox: no session 'fig44'; the sessions are fig4, fig5, ")
    for name in ("fig11", "contention", "v2", "all", "plan", "report", "tests", "lint", "bench"):
        assert f" {name}," in line or line.endswith(f" {name} (nox -l says what each does)")
    # a known one with a bad one beside it is refused too, before anything runs
    res = _nox("-s", "plan", "fig44", "--", "--preset", "tiny")
    assert res.returncode == 2 and "no session 'fig44'" in res.stderr


def test_unknown_sessions_reads_every_way_nox_takes_names():
    import noxfile

    known = ["fig4", "plan", "tests"]
    assert noxfile.unknown_sessions(["-s", "fig44"], {}, known) == ["fig44"]
    assert noxfile.unknown_sessions(["--session", "plan", "x"], {}, known) == ["x"]
    assert noxfile.unknown_sessions(["-e", "tests"], {}, known) == []
    assert noxfile.unknown_sessions(["-l"], {"NOXSESSION": "fig4,nope"}, known) == ["nope"]
    # what follows `--` is the session's, not nox's
    assert noxfile.unknown_sessions(["-s", "plan", "--", "-s", "x"], {}, known) == []


def test_nox_tests_runs_two_processes_unless_the_caller_chose():
    import noxfile

    assert noxfile.test_workers([], 2) == ["-n", "2", "--dist", "loadfile"]
    assert noxfile.test_workers(["-m", "not slow"], 16) == ["-n", "2", "--dist", "loadfile"]
    assert noxfile.test_workers([], 1) == ["-n", "1", "--dist", "loadfile"]
    assert noxfile.test_workers([], None) == ["-n", "1", "--dist", "loadfile"]
    for chosen in (
        ["-n", "0"],
        ["-n4"],
        ["--numprocesses=3"],
        ["-p", "no:xdist"],
        ["--dist", "load"],
    ):
        assert noxfile.test_workers(["-x", *chosen], 2) == []


def test_report_without_a_folder_says_what_to_give():
    res = _nox("-s", "report")
    assert res.returncode == 2, res.stdout + res.stderr
    (line,) = _error_lines(res.stderr)
    assert line.startswith("nox -s report needs a results folder: nox -s report -- results/<run>")
    assert "--help" not in line


def test_report_without_a_folder_names_the_latest_run(tmp_path):
    """Where runs are there, the line names the latest one to give."""
    import shutil

    shutil.copy(ROOT / "noxfile.py", tmp_path)
    shutil.copytree(ROOT / "artifact" / "figures", tmp_path / "artifact" / "figures")
    for run in ("20261201T000000Z-tiny", "20261202T000000Z-tiny"):
        (tmp_path / "results" / run).mkdir(parents=True)
        (tmp_path / "results" / run / "summary.csv").write_text("figure\n")
    env = {k: v for k, v in os.environ.items() if k != "NOXSESSION"}
    res = subprocess.run(
        [sys.executable, "-m", "nox", "-f", str(tmp_path / "noxfile.py"), "-s", "report"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert res.returncode == 2, res.stdout + res.stderr
    assert _error_lines(res.stderr) == [
        "nox -s report needs a results folder: nox -s report -- results/<run> "
        "(the latest here: results/20261202T000000Z-tiny)"
    ]


def test_out_naming_a_file_says_it_is_a_file(tmp_path, capsys):
    f = tmp_path / "notes.txt"
    f.write_text("x")
    with pytest.raises(ArtifactError, match=r"^--out '.*notes.txt' is a file, not a folder"):
        check_not_a_file(f)
    with pytest.raises(ArtifactError, match=r"lies under '.*notes.txt', a file, not a folder"):
        check_not_a_file(f / "run")
    check_not_a_file(tmp_path / "new" / "run")  # a folder yet to be made is fine
    # `all` says it once, before any figure starts (not once per figure)
    assert main(["all", "--out", str(f)]) == 2
    err = capsys.readouterr().err
    assert [line for line in err.splitlines() if line.startswith("error:")] == [
        f"error: --out '{f}' is a file, not a folder: give a new folder or a run's results folder"
    ]
