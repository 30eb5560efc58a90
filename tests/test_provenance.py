"""Provenance from the tree itself (issue 47): the commit is written into the source when
`git archive` makes a tarball (.gitattributes: export-subst on artifact/_commit.py), and
ARTIFACT_GIT_COMMIT may only confirm it."""

import io
import os
import shutil
import subprocess
import sys
import tarfile

import pytest

from artifact import env
from artifact.core.errors import ArtifactError
from tests.conftest import ROOT


def _git(*args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()


def _is_checkout() -> bool:
    try:
        return os.path.samefile(_git("rev-parse", "--show-toplevel"), ROOT)
    except (OSError, subprocess.CalledProcessError):
        return False


@pytest.mark.skipif(
    shutil.which("git") is None or not _is_checkout(), reason="needs a git checkout"
)
def test_an_archive_records_its_commit_with_no_environment_variable(tmp_path):
    head = _git("rev-parse", "HEAD")
    tar = subprocess.run(
        ["git", "archive", "--format=tar", "HEAD", "artifact", ".gitattributes"],
        cwd=ROOT, capture_output=True, check=True,
    ).stdout  # fmt: skip
    with tarfile.open(fileobj=io.BytesIO(tar)) as archive:
        for member in archive.getmembers():  # no extractall(filter=): Python 3.11.2
            archive.extract(member, tmp_path)
    assert f'COMMIT = "{head}"' in (tmp_path / "artifact" / "_commit.py").read_text()
    clean = {k: v for k, v in os.environ.items() if k not in (env.COMMIT_ENV, "PYTHONPATH")}
    probe = "import artifact, artifact.env as e; print(artifact.__file__); print(e.git_commit())"
    res = subprocess.run(
        [sys.executable, "-c", probe], cwd=tmp_path, env=clean, capture_output=True, text=True
    )
    assert res.returncode == 0, res.stderr
    where, commit = res.stdout.split()
    assert where.startswith(str(tmp_path))  # the archive's source, not the checkout's
    assert commit == head


def test_a_commit_variable_that_is_no_commit_is_refused(monkeypatch):
    monkeypatch.setenv(env.COMMIT_ENV, "next")
    with pytest.raises(ArtifactError) as e:
        env.git_commit()
    message = str(e.value)
    assert message.startswith(
        "ARTIFACT_GIT_COMMIT='next' is not a commit id; accepted: 7 to 40 hex"
    )
    assert "\n" not in message


def test_a_commit_variable_may_only_confirm_the_trees_own(monkeypatch):
    own = "0ad00b187a99c9bf5e403afac2b30bacc27a369e"
    monkeypatch.setattr(env, "tree_commit", lambda: own)
    monkeypatch.setenv(env.COMMIT_ENV, "0ad00b1")  # abbreviated: the same commit
    assert env.git_commit() == own
    monkeypatch.setenv(env.COMMIT_ENV, "24a0901")
    with pytest.raises(ArtifactError, match="disagrees with this tree's own commit 0ad00b187a99"):
        env.git_commit()
    # a bare copy of the tree (no checkout, no archive stamp): the variable is all there is
    monkeypatch.setattr(env, "tree_commit", lambda: None)
    assert env.git_commit() == "24a0901"
    monkeypatch.delenv(env.COMMIT_ENV)
    assert env.git_commit() == "unknown"


def test_a_checkout_inside_nothing_reads_its_own_head_only_at_its_top(tmp_path, monkeypatch):
    """An archive unpacked inside another checkout is not that checkout: its commit comes
    from its stamp, never from the enclosing repository's HEAD."""
    if shutil.which("git") is None:
        pytest.skip("needs git")
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    monkeypatch.setattr(env, "REPO_ROOT", tmp_path / "unpacked")
    (tmp_path / "unpacked").mkdir()
    assert env._checkout_commit() is None
