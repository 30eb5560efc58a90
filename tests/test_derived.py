"""Derived files are checked before they are trusted (issue 61 item 1): a damaged
summary, verdict table, status, plan or record is rebuilt from the records or refused in
one line naming the file and the command that rebuilds it; never a silently wrong report."""

import json
import shutil

import pandas as pd
import pytest

from tests.conftest import run_cli


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    out = tmp_path_factory.mktemp("derived") / "run"
    res = run_cli("run", "fig8", "--preset", "tiny", "--reps", "2", "--out", str(out), timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    assert run_cli("compare", str(out)).returncode == 0
    return out


def _copy(folder, tmp_path):
    out = tmp_path / "run"
    shutil.copytree(folder, out, ignore=shutil.ignore_patterns("traces", ".run.lock"))
    return out


def _one_line(res):
    lines = [x for x in res.stderr.splitlines() if x.strip()]
    assert res.returncode == 2 and len(lines) == 1 and lines[0].startswith("error:"), res.stderr
    return lines[0]


def _cut(path):
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


@pytest.mark.slow
def test_a_summary_cut_in_half_is_rebuilt_by_compare_and_refused_by_report(folder, tmp_path):
    out = _copy(folder, tmp_path)
    before = pd.read_csv(out / "verdicts.csv", keep_default_na=False)
    _cut(out / "summary.csv")
    line = _one_line(run_cli("report", str(out)))
    assert "summary.csv' is not what `summarize` wrote" in line and "summarize" in line
    assert not (out / "report").exists()
    res = run_cli("compare", str(out))
    assert res.returncode == 0 and "summarizing again from the records" in res.stdout + res.stderr
    after = pd.read_csv(out / "verdicts.csv", keep_default_na=False)
    pd.testing.assert_frame_equal(before, after)  # the controls and V1 are all back


@pytest.mark.slow
def test_an_edited_verdict_table_is_refused_by_report(folder, tmp_path):
    out = _copy(folder, tmp_path)
    rows = (out / "verdicts.csv").read_text().splitlines(keepends=True)
    (out / "verdicts.csv").write_text("".join(rows[:-1]))  # a row gone: a control, say
    line = _one_line(run_cli("report", str(out)))
    assert "verdicts.csv' is not what `compare` wrote" in line and " compare " in line


@pytest.mark.slow
@pytest.mark.parametrize(
    ("path", "content", "said"),
    [
        ("status/fig8.json", "null", "not a figure's status"),
        ("plan.json", "{}", "not a folder's plan"),
    ],
)
def test_a_status_or_plan_of_the_wrong_shape_is_one_line(folder, tmp_path, path, content, said):
    out = _copy(folder, tmp_path)
    (out / path).write_text(content)
    command = (
        ("compare", str(out))
        if path.startswith("status")
        else ("run", "fig8", "--preset", "tiny", "--out", str(out))
    )
    line = _one_line(run_cli(*command))
    assert said in line and path.split("/")[-1] in line


@pytest.mark.slow
def test_a_record_of_the_wrong_shape_is_named_with_how_to_measure_it_again(folder, tmp_path):
    out = _copy(folder, tmp_path)
    record = sorted((out / "records").glob("**/rep-001.json"))[0]
    record.write_text(json.dumps({}))
    line = _one_line(run_cli("summarize", str(out)))
    assert str(record) in line and "not a record" in line and "delete it and re-run" in line
