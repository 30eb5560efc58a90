"""The figure registry holds together: each spec's parts exist where the others look."""

import dataclasses

import pandas as pd
import pytest

from artifact.core.errors import ArtifactError
from artifact.core.options import FIELDS
from artifact.figures import ALL, OWN_RECORDS, REGISTRY, Panel, Series, spec_of
from artifact.figures.names import figure_names
from tests.conftest import ROOT

H200_SUMMARY = ROOT / "results" / "h200x1" / "all-quick" / "summary.csv"


def problems(spec, measured: set[tuple[str, str, str]]) -> list[str]:
    """What in `spec` points at nothing: its expected file, its options, its plotted rows."""
    out = []
    if spec.expected and not (ROOT / "expected" / spec.expected).is_file():
        out.append(f"expected/{spec.expected} missing")
    out += [f"unknown option {o}" for o in spec.options if o not in FIELDS]
    derives = {d.metric for d in spec_of(spec.records).derived}
    # a figure the H200 did not run (fig9 needs --allow-power-cap): any figure's rows
    ran = {(f, m, x) for f, m, x in measured if f == spec.records}
    seen = {(m, x) for _, m, x in (ran or measured)}
    for panel in spec.panels:
        for s in panel.series:
            known = s.metric in derives if s.mode == "derived" else (s.mode, s.metric) in seen
            if not known:
                out.append(f"plots {s.mode}/{s.metric}, which {spec.records} does not hold")
    return out


@pytest.fixture(scope="module")
def measured() -> set[tuple[str, str, str]]:
    """(figure, mode, metric) measured on one H200 (the committed quick run)."""
    df = pd.read_csv(H200_SUMMARY)
    df = df[df["kind"] == "measured"]
    return set(zip(df["figure"], df["mode"], df["metric"], strict=True))


@pytest.mark.parametrize("name", ALL)
def test_every_spec_points_at_what_exists(name, measured):
    spec = REGISTRY[name]
    assert spec.name == name  # the file name is the figure's name
    assert problems(spec, measured) == []


def test_a_broken_spec_is_caught(measured):
    broken = dataclasses.replace(
        REGISTRY["fig8"],
        expected="fig99.yaml",
        options=frozenset({"precision", "colour"}),
        panels=(Panel((Series("derived", "speedup", "x"), Series("overlap", "e2e_s", "y")), "?"),),
    )
    assert problems(broken, measured) == [
        "expected/fig99.yaml missing",
        "unknown option colour",
        "plots derived/speedup, which fig8 does not hold",
        "plots overlap/e2e_s, which fig8 does not hold",
    ]


def test_every_expected_file_belongs_to_a_figure():
    claimed = {s.expected for s in REGISTRY.values()} | {"headline.yaml"}
    assert {p.name for p in (ROOT / "expected").glob("*.yaml")} <= claimed


def test_names_come_from_the_files_in_paper_order():
    assert figure_names() == list(ALL)
    assert ALL[:8] == tuple(f"fig{n}" for n in range(4, 12))
    assert "fig5" not in OWN_RECORDS and spec_of("fig5").records == "fig4"


def test_eq1_has_one_name():
    """Every figure that derives Eq. 1 (overlap vs sequential compute) calls it slowdown."""
    for spec in REGISTRY.values():
        for d in spec.derived:
            if d.inputs == (("overlap", "compute_ms"), ("sequential", "compute_ms")):
                assert d.metric == "slowdown", (spec.name, d.metric)


def test_an_unknown_figure_is_a_one_line_error():
    with pytest.raises(ArtifactError, match=r"fig12.*fig4, fig5"):
        spec_of("fig12")


def test_the_a_a_repeat_runs_exactly_where_the_noise_floor_is_derived():
    """One declaration decides it (the spec's derived quantities): the experiments' phases
    and the plan's time both read FigureSpec.runs_noise_floor."""
    from artifact.core.config import get_preset
    from artifact.estimate import model
    from artifact.experiments import training
    from artifact.run.modes import OVERLAP_REPEAT

    repeat = {name for name, spec in REGISTRY.items() if spec.runs_noise_floor}
    assert repeat == {"fig4", "fig8", "fig9", "fig10", "fig11", "contention", "v2"}
    assert OVERLAP_REPEAT in training.training_phases(1)  # every training figure runs it
    # the plan prices a fifth phase exactly there: fig6's repetition is 4/5 of fig8's
    quick = get_preset("quick")
    fig6, fig8 = (model._microbench_costs(quick, f, 0, 0.01, 1)[0] for f in ("fig6", "fig8"))
    assert fig6 / fig8 == pytest.approx(4 / 5)
