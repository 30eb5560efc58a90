"""`all --budget 6h` (artifact.budget): the figures that feed the most of the paper's items
an hour are kept while the plan's time fits; the others are recorded "not run" with why,
and the report's figure status (artifact.judge.figure_status) says so."""

import pandas as pd
import pytest

from artifact import budget, plan, suite
from artifact.core.config import get_preset
from artifact.core.errors import ArtifactError
from artifact.core.options import RunOptions
from artifact.judge.figure_status import figure_status
from artifact.launch import stage
from artifact.store import RunStore

REVIEW_4 = ["--preset", "review", "--gpus", "4"]


REVIEW_4_QUERY = plan.PlanQuery(preset="review", gpus=4)


def _hours_alone(figure: str) -> float:
    return (
        sum(r.time_s for r in plan.plan(plan.PlanQuery.of(plan.parse([figure, *REVIEW_4])))[2])
        / 3600
    )


def test_budget_values():
    assert budget.parse("6h") == 6 * 3600 and budget.parse("90m") == 5400
    assert budget.parse("1.5h") == 5400 and budget.parse("30s") == 30
    with pytest.raises(ArtifactError) as e:
        budget.parse("six")
    assert str(e.value) == "--budget 'six'; accepted: a number with s, m or h: 90m, 6h, 1.5h"
    assert budget.pop(["--preset", "review", "--budget", "2h"]) == (["--preset", "review"], 7200)


@pytest.mark.slow  # over 1.5 s on 2 cores (a CLI process, or a long simulation)
def test_a_bad_budget_is_one_line_exit_2(cli):
    res = cli("all", "--budget", "0h")
    assert res.returncode == 2
    assert res.stderr.strip() == (
        "error: --budget '0h'; accepted: a number with s, m or h: 90m, 6h, 1.5h"
    )


def test_the_budget_keeps_what_judges_most_an_hour():
    """review on 4 GPUs in one hour: fig4 alone costs more than the hour and is left out
    with its price; the microbenchmark figures, which feed items in minutes, are kept,
    and what is kept fits the hour."""
    kept, left = budget.select(REVIEW_4_QUERY, 3600)
    fig4_h = _hours_alone("fig4")
    assert fig4_h > 1
    from artifact.core.units import duration

    assert "fig4" in left and f"the plan prices it at {duration(fig4_h * 3600)}" in left["fig4"]
    assert "it would feed 17 more of the paper's items" in left["fig4"]
    assert {"fig6", "fig7", "fig8"} <= set(kept)
    assert sum(_hours_alone(f) for f in kept) <= 1
    assert set(kept) | set(left) == {r.figure for r in _rows_review()}


def _rows_review():
    return plan.plan(REVIEW_4_QUERY)[2]


def test_a_budget_cut_run_records_what_it_left_out(tmp_path, monkeypatch):
    """`all` under a budget runs only the kept figures and records each left-out one
    "not run" with why: the report's figure status lists it so."""
    calls = []

    def fake_child(argv, env=None):  # `python -m artifact ARGV`, each stage's
        calls.append(argv[:2])
        return 0, ""

    monkeypatch.setattr(suite, "child", fake_child)
    monkeypatch.setattr(suite.preflight, "main", lambda args: 0)
    out = tmp_path / "run"
    rc = suite.run_all([*REVIEW_4, "--out", str(out)], say=lambda line: None, budget_s=3600)
    assert rc == 0
    ran = [c[1] for c in calls if c[0] == "run"]
    assert "fig4" not in ran and "fig6" in ran
    status = RunStore(out).status()
    category, why = figure_status("fig4", status, pd.DataFrame({"figure": []}))
    assert category == "not run" and why.startswith("left out by --budget 60.0 min")


@pytest.mark.parametrize(
    ("figure", "preset", "gpus", "world"),
    [("fig8", "tiny", None, None), ("fig4", "quick", 4, None), ("fig4", "quick", None, 8)],
)
def test_the_typed_plan_call_prices_what_the_plan_argv_did(tmp_path, figure, preset, gpus, world):
    """run's disk check (launch/stage.py) builds its query by hand and calls
    budget.disk_left; it gives the rows and bytes `plan FIG --preset P [--gpus N |
    --emulate-world W]` gives."""
    argv = [figure, "--preset", preset]
    argv += ["--gpus", str(gpus)] if gpus else []
    argv += ["--emulate-world", str(world)] if world else []
    query = plan.PlanQuery.of(plan.parse(argv))
    by_hand = plan.PlanQuery((figure,), preset, gpus=gpus, emulate_world=world)
    rows = plan.plan(by_hand)[2]
    assert rows == plan.plan(query)[2]
    (tmp_path / "records" / figure).mkdir(parents=True)
    (tmp_path / "records" / figure / "r.json").write_text("x" * 1000)
    left = budget.unwritten(rows, tmp_path, {figure})
    assert left == budget.disk_left(query, tmp_path, {figure}) and left is not None
    options = RunOptions(emulate_world=world)
    nproc = gpus or 1
    assert stage.disk_need(figure, get_preset(preset), nproc, options, tmp_path) == left


def test_all_prices_runs_flags_as_run_parses_them():
    """`all`'s plan is drawn from its run flags once: the preset and world as `run` reads
    them (its other flags aside, --adaptive too), every figure."""
    args = ["--preset", "quick", "--gpus", "1", "--out", "/tmp/x", "--reps", "3", "--adaptive"]
    assert suite.plan_query([*args, "--emulate-world", "4"]) == plan.PlanQuery(
        preset="quick", gpus=1, emulate_world="4"
    )
    assert suite.plan_query(["--nproc=4", "--ranks-per-gpu", "2"]) == plan.PlanQuery(
        nproc=4, ranks_per_gpu=2
    )
    assert set(suite._left_out(suite.plan_query(args), None)) == {"fig10", "fig11"}
    assert suite._left_out(suite.plan_query(["--preset", "quick", "--gpus", "2"]), None) == {}


def test_all_prints_the_plans_summary_and_goes_on_without_one(tmp_path, monkeypatch, capsys):
    """The plan's summary comes first, drawn in `all`'s own process (no `plan` stage is
    started); a plan it cannot draw is one error line, and every figure still runs."""
    calls = []
    monkeypatch.setattr(suite, "child", lambda argv, env=None: calls.append(argv[:2]) or (0, ""))
    monkeypatch.setattr(suite.preflight, "main", lambda args: 0)
    tiny = ["--preset", "tiny", "--adaptive", "--out", str(tmp_path / "a")]
    assert suite.run_all(tiny, say=lambda line: None) == 0
    out = capsys.readouterr().out
    assert out.startswith("plan: preset tiny, 2 CPU processes") and "total: " in out
    assert [c[0] for c in calls].count("plan") == 0 and ["run", "fig4"] in calls
    calls.clear()
    none = ["--preset", "quick", "--gpus", "0", "--out", str(tmp_path / "b")]
    assert suite.run_all(none, say=lambda line: None) == 0
    captured = capsys.readouterr()
    assert captured.err == "error: --gpus must be at least 1, got 0\n" and not captured.out
    assert ["run", "fig10"] in calls  # no plan: nothing decided "not run"
