"""The images carry what their tests read (issue 61 item 9): every committed results
folder a test names is kept by .dockerignore, so `nox -s tests` in an image reads it."""

import importlib.util
import re

from tests.conftest import ROOT

# `ROOT / "results" / "h100x1" / "name"` or "results/h100x1/name/..." in a test's source
_PATHS = re.compile(r'ROOT / "results"((?: / "[^"]+")+)|"(results/h[0-9x]+/[^"]+)"')


def _cut():
    spec = importlib.util.spec_from_file_location("cut_results", ROOT / ".ci" / "cut_results.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def dockerignore_keeps(path: str, rules: list[str]) -> bool:
    return _cut().keeps(path, rules)


def _rules() -> list[str]:
    return _cut().rules(ROOT)


def _folders_tests_read() -> set[str]:
    found = set()
    for test in sorted((ROOT / "tests").glob("test_*.py")):
        for joined, literal in _PATHS.findall(test.read_text()):
            if joined:
                parts = re.findall(r'"([^"]+)"', joined)
                found.add("/".join(["results", *parts[:2]]))
            else:
                found.add("/".join(literal.split("/")[:3]))
    for data in sorted((ROOT / "artifact" / "data").glob("*.json")):  # runs tests judge again
        found |= {
            "/".join(m.split("/")[:3])
            for m in re.findall(r'"(results/h[0-9x]+/[^"]+)"', data.read_text())
        }
    return {f for f in found if (ROOT / f).exists()}


def test_the_rules_read_as_docker_reads_them():
    rules = [
        "results/*",
        "!results/h200*",
        "!results/h100x1",
        "results/h100x1/*",
        "!results/h100x1/a",
    ]
    assert dockerignore_keeps("results/h200x1/all-quick/summary.csv", rules)
    assert dockerignore_keeps("results/h100x1/a/summary.csv", rules)
    assert not dockerignore_keeps("results/h100x1/b/summary.csv", rules)
    assert not dockerignore_keeps("results/other/x", rules)
    assert dockerignore_keeps("artifact/cli.py", rules)


def test_every_results_folder_a_test_reads_is_in_the_images():
    folders = _folders_tests_read()
    assert {"results/h100x1/emulated-7b9e71c", "results/h100x1/mechanisms-af18ec7"} <= folders
    missing = sorted(f for f in folders if not dockerignore_keeps(f + "/summary.csv", _rules()))
    assert not missing, f"tests read folders the images leave out (.dockerignore): {missing}"


def test_the_cut_leaves_what_an_image_carries(tmp_path):
    """CI's floor clone runs the fast loop on results/ as the images carry it."""
    (tmp_path / ".dockerignore").write_text(
        "results/*\n!results/h200*\n!results/h100x1\nresults/h100x1/*\n!results/h100x1/a\n"
    )
    for folder in ("h200x1/q", "h100x1/a", "h100x1/b", "other"):
        (tmp_path / "results" / folder).mkdir(parents=True)
        (tmp_path / "results" / folder / "summary.csv").write_text("x")
    _cut().main(tmp_path)
    left = sorted(
        p.relative_to(tmp_path).as_posix() for p in (tmp_path / "results").rglob("summary.csv")
    )
    assert left == ["results/h100x1/a/summary.csv", "results/h200x1/q/summary.csv"]
