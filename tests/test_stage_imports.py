"""summarize, compare, report and plan read results; they must not need torch.

Each runs as a user runs it (`python -m artifact STAGE`) on the committed one-H200
records, in a subprocess whose exit hook says whether torch was ever imported.
"""

import ast
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from tests.conftest import ROOT

H200 = ROOT / "results" / "h200x1" / "all-quick"
# at exit: which heavy modules the stage imported
PROBE = (
    "import atexit, runpy, sys\n"
    "atexit.register(lambda: print('IMPORTED', sorted(m for m in ('torch', 'deepspeed', "
    "'megatron') if m in sys.modules)))\n"
    "sys.argv = ['artifact', *sys.argv[1:]]\n"
    "runpy.run_module('artifact', run_name='__main__')\n"
)


@pytest.fixture(scope="module")
def h200_folder(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("h200")
    with tarfile.open(H200 / "records.tgz") as tar:
        tar.extractall(out, members=plain_members(tar))
    shutil.copytree(H200 / "status", out / "status")
    for stage in ("summarize", "compare"):  # what the report reads, whatever the test order
        _imports(stage, str(out))
    return out


def plain_members(tar: tarfile.TarFile) -> list[tarfile.TarInfo]:
    """The archive's files and folders, refused if one would land outside the target
    (an absolute name, `..`) or is a link or device: what extractall's filter="data" does,
    which Python 3.11.2 (Debian 12's) lacks (it arrived in 3.11.4)."""
    members = tar.getmembers()
    for m in members:
        parts = Path(m.name).parts
        if m.name.startswith("/") or ".." in parts or not (m.isfile() or m.isdir()):
            raise ValueError(
                f"refusing {m.name!r} in {tar.name}: not a plain file under the target"
            )
    return members


def test_plain_members_refuses_what_could_escape(tmp_path):
    import io

    bad = tmp_path / "bad.tgz"
    with tarfile.open(bad, "w:gz") as tar:
        info = tarfile.TarInfo("../outside.txt")
        info.size = 2
        tar.addfile(info, io.BytesIO(b"hi"))
    with tarfile.open(bad) as tar, pytest.raises(ValueError, match="outside.txt"):
        plain_members(tar)
    with tarfile.open(H200 / "records.tgz") as tar:
        assert len(plain_members(tar)) > 100


def _imports(*args: str) -> tuple[str, str]:
    res = subprocess.run(
        [sys.executable, "-c", PROBE, *args], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    return res.stdout.splitlines()[-1], res.stdout


@pytest.mark.parametrize(
    "stage", [("summarize",), ("compare",), ("report",), ("plan", "--preset", "paper")]
)
@pytest.mark.slow
def test_stage_runs_without_torch(h200_folder, stage):
    args = [*stage, str(h200_folder)] if stage[0] != "plan" else [*stage, "--gpus", "4"]
    last, _ = _imports(*args)
    assert last == "IMPORTED []", f"{stage[0]} imported {last}"


@pytest.mark.slow  # over 1.5 s on 2 cores (a CLI process, or a long simulation)
def test_the_probe_sees_torch_where_it_is_imported():
    """The check above can fail: a command that imports torch is caught."""
    last, _ = _imports("env", "--json")
    assert "torch" in last, last


def _imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
    return names


def judges_imported(folder: Path) -> dict[str, set[str]]:
    """Report modules that import a judging stage (compare, validation)."""
    judges = {"artifact.judge.compare", "artifact.judge.validation"}
    found = {p.name: _imported_modules(p) & judges for p in sorted(folder.glob("*.py"))}
    return {k: v for k, v in found.items() if v}


def test_the_report_only_reads(tmp_path):
    assert judges_imported(ROOT / "artifact" / "report") == {}
    # and the check can fail: a report module that judges is named
    (tmp_path / "sneaky.py").write_text("from artifact.judge import validation\n")
    assert judges_imported(tmp_path) == {"sneaky.py": {"artifact.judge.validation"}}
