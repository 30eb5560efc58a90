"""The figure registry holds together: each spec's parts exist where the others look."""

import dataclasses

import pandas as pd
import pytest

from artifact.core.errors import ArtifactError
from artifact.core.options import FIELDS
from artifact.figures import (
    REGISTRY,
    Panel,
    Series,
    all_figures,
    own_records,
    paper_figures,
    spec_of,
)
from artifact.figures.names import figure_names, figure_title
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


@pytest.mark.parametrize("name", all_figures())
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
    """The paper's figures by number (fig10 after fig9, not after fig1), then the rest."""
    import re

    assert figure_names() == list(all_figures())
    numbered = [n for n in all_figures() if re.fullmatch(r"fig\d+", n)]
    assert all_figures()[: len(numbered)] == tuple(numbered)
    assert [int(n[3:]) for n in numbered] == sorted(int(n[3:]) for n in numbered)
    assert len(numbered) < len(all_figures())  # the experiments beyond the paper come last
    assert "fig5" not in own_records() and spec_of("fig5").records == "fig4"


def test_nox_lists_each_figure_by_its_title_and_what_runs():
    """`nox -l`'s lines, from the files without importing them (nox has no torch)."""
    assert figure_title("fig8").startswith("Fig. 8: power and performance of an all-reduce")
    assert figure_title("fig5").endswith("; runs fig4's experiment, whose records it reads")
    drawn = [n for n in figure_names() if "runs " in figure_title(n)]
    assert drawn == [n for n in figure_names() if spec_of(n).records_of]


def test_eq1_has_one_name():
    """Every figure that derives Eq. 1 (overlap vs sequential compute) calls it slowdown."""
    for spec in REGISTRY.values():
        for d in spec.derived:
            if d.inputs == (("overlap", "compute_ms"), ("sequential", "compute_ms")):
                assert d.metric == "slowdown", (spec.name, d.metric)


def test_an_unknown_figure_is_a_one_line_error():
    with pytest.raises(ArtifactError) as e:
        spec_of("nofig")
    assert str(e.value) == f"unknown experiment 'nofig'; accepted: {', '.join(all_figures())}"


def test_the_a_a_repeat_runs_exactly_where_the_noise_floor_is_derived(monkeypatch):
    """One declaration decides it (the spec's derived quantities, and which figure copies
    whose records): the experiments' phases and the plan's time both read
    figures.runs_aa_repeat."""
    import dataclasses

    from artifact.core.config import get_preset
    from artifact.estimate import model
    from artifact.experiments import training
    from artifact.figures import runs_aa_repeat
    from artifact.rank.modes import OVERLAP_REPEAT

    derives = {name for name, spec in REGISTRY.items() if spec.runs_noise_floor}
    copied = {s.reuses for s in REGISTRY.values() if s.reuses and s.runs_noise_floor}
    assert {name for name in REGISTRY if runs_aa_repeat(name)} == derives | copied
    # fig6 derives no floor, but fig8 copies its records, so they hold the repeat too
    assert "fig6" not in derives and REGISTRY["fig8"].reuses == "fig6" and runs_aa_repeat("fig6")
    assert OVERLAP_REPEAT in training.training_phases(1)  # every training figure runs it
    quick = get_preset("quick")

    def fig6_over_fig8():
        fig6, fig8 = (model._microbench_costs(quick, f, 0.01, 1)[0] for f in ("fig6", "fig8"))
        return fig6 / fig8

    assert fig6_over_fig8() == pytest.approx(1)
    # were fig8 not to copy fig6's records, fig6 would price 4 phases to fig8's 5
    monkeypatch.setitem(REGISTRY, "fig8", dataclasses.replace(REGISTRY["fig8"], reuses=None))
    assert not runs_aa_repeat("fig6")
    assert fig6_over_fig8() == pytest.approx(4 / 5)


# --- a throwaway figure: one spec and one expected YAML, nothing else edited ------------

THROWAWAY_SPEC = """
from artifact.figures import derived
from artifact.figures.spec import MICROBENCH_OPTIONS, FigureSpec

SPEC = FigureSpec(
    name="fig99",
    title="Fig. 99: a throwaway figure on fig8's experiment",
    experiment="fig8",
    options=MICROBENCH_OPTIONS,
    derived=derived.MICROBENCH,
    expected="fig99.yaml",
)
"""

THROWAWAY_YAML = """
figure: fig99
claims:
  - id: throwaway_matmul_slower
    statement: "a matmul runs slower beside an all-reduce than alone"
    kind: every_row_positive
    metric: slowdown
    rows: {figure: fig99, mode: derived}
    source: {section: "none", figure: "Fig. 99"}
    scope: any
"""


@pytest.fixture
def throwaway(tmp_path, monkeypatch):
    """fig99: its spec file and its expected file, both under tmp_path; the registry
    holds it for the test (as it would hold artifact/figures/fig99.py)."""
    from artifact.figures import load_folder

    (tmp_path / "fig99.py").write_text(THROWAWAY_SPEC)
    monkeypatch.setitem(REGISTRY, "fig99", load_folder(tmp_path)["fig99"])
    expected = tmp_path / "expected"
    expected.mkdir()
    (expected / "fig99.yaml").write_text(THROWAWAY_YAML)
    return expected


def _rows(rows, figure):
    return [r for r in rows if r.figure == figure]


def test_a_throwaway_figure_is_in_every_list_of_the_registry(throwaway):
    assert all_figures()[-1] == "fig99" and "fig99" in own_records()
    assert "fig99" in paper_figures()
    with pytest.raises(ArtifactError, match=r"nofig.*, " + ", ".join(all_figures()[-2:])):
        spec_of("nofig")


def test_the_plan_prices_a_throwaway_figure_as_its_experiments_figures(throwaway):
    """No calibration of its own: the plan prices fig99 with fig8's (same experiment) and
    says so on every row."""
    from artifact.core.config import get_preset
    from artifact.estimate import model

    for preset, gpus in (("tiny", 2), ("quick", 1), ("paper", 4)):
        rows = model.build(get_preset(preset), model.figures_of([]), gpus, 80)
        # fig8 alone: in the whole plan its rows are fig6's copies (FigureSpec.reuses)
        alone = model.build(get_preset(preset), model.figures_of(["fig8"]), gpus, 80)
        new, fig8 = _rows(rows, "fig99"), _rows(alone, "fig8")
        assert len(new) == len(fig8) >= 1, preset
        for a, b in zip(new, fig8, strict=True):
            assert (a.parallelism, a.time_s, a.records_bytes) == (
                b.parallelism,
                b.time_s,
                b.records_bytes,
            )
            assert a.time_s > 0 and "priced with fig8's calibration" in a.note
            assert "calibration" not in b.note
    # on the CPU: fig8's measured time (package data), split over its one configuration
    from artifact.estimate import reference

    tiny = _rows(model.build(get_preset("tiny"), ["fig99"], 2, 80), "fig99")
    assert [r.time_s for r in tiny] == [reference.values("tiny_measured_s")["fig8"]]


def test_the_plan_command_lists_a_throwaway_figure(throwaway, capsys):
    from artifact import plan

    assert plan.main(["fig99", "--preset", "quick", "--gpus", "1"]) == 0
    out = capsys.readouterr().out
    assert "fig99" in out and "priced with fig8's calibration" in out


def test_a_figure_with_no_calibration_anywhere_is_a_one_line_error(throwaway, monkeypatch):
    """Neither fig99 nor another figure of its experiment measured: the plan names the
    figure and the missing entry, not a KeyError."""
    from artifact.core.config import get_preset
    from artifact.estimate import model
    from artifact.estimate import reference as ref

    data = {k: dict(v) for k, v in ref._data().items() if isinstance(v, dict)}
    data["tiny_measured_s"]["values"] = {
        f: s for f, s in data["tiny_measured_s"]["values"].items() if f != "fig8"
    }
    monkeypatch.setattr(ref, "_data", lambda: data)
    with pytest.raises(ArtifactError) as e:
        model.build(get_preset("tiny"), ["fig99"], 2, 80)
    message = str(e.value)
    assert "\n" not in message
    assert message.startswith("fig99: artifact/data/reference.json 'tiny_measured_s' has no value")
    assert "run fig99 once" in message


def test_a_throwaway_figure_on_a_new_experiment_needs_a_sweep(throwaway, monkeypatch):
    from artifact.core.config import get_preset
    from artifact.estimate import model

    monkeypatch.setitem(REGISTRY, "fig99", dataclasses.replace(REGISTRY["fig99"], experiment="x"))
    with pytest.raises(ArtifactError, match=r"^fig99: no sweep for experiment 'x'; known: fig4, "):
        model.build(get_preset("quick"), ["fig99"], 1, 80)


def test_summarize_compare_and_report_take_a_throwaway_figure(throwaway, tmp_path):
    """Records of fig99 become summary rows with its derived Eq. 1, its YAML's claim a
    verdict, and the report a section and a time row for it; the verdict: a matmul 20 % slower beside the all-reduce in every repetition, and V1
    (sequential and nocomm compute equal) holds."""
    from artifact.analyze.summarize import write_summary
    from artifact.judge.compare import write_verdicts
    from artifact.report import write_report
    from artifact.store import RunStore

    out = tmp_path / "run"
    store = RunStore(out)
    config = {"gpu": "NVIDIA H200", "model": "matmul-8192", "parallelism": "allreduce"}
    config |= {"precision": "bf16", "world_size": 4}
    for rep, drift in enumerate((1.0, 1.02, 0.98, 1.01, 0.99)):
        for mode, compute_ms in (("overlap", 12.0), ("sequential", 10.0), ("nocomm", 10.0)):
            metrics = {"compute_ms": compute_ms * drift, "communication_ms": 5.0}
            store.write_record(
                figure="fig99", config_id="c1", config=config, mode=mode, rep=rep,
                metrics=metrics, units={"compute_ms": "ms", "communication_ms": "ms"},
                provenance={"gpu_model": "NVIDIA H200", "preset": "tiny"},
            )  # fmt: skip
    summary = write_summary(out).set_index(["figure", "mode", "metric"])
    slowdown = summary.loc[("fig99", "derived", "slowdown")]
    assert slowdown["mean"] == pytest.approx(0.2) and slowdown["n"] == 5
    verdicts = write_verdicts(out, throwaway).set_index("item")
    # its claim, and V1 (sequential vs nocomm compute), which its derived rows carry
    assert dict(verdicts["verdict"]) == {
        "throwaway_matmul_slower": "reproduced",
        "v1_sequential_baseline": "holds",
    }
    assert set(verdicts["figure"]) == {"fig99"}
    write_report(out)
    md = (out / "report" / "appendix.md").read_text()
    assert "## Fig. 99: a throwaway figure on fig8's experiment (fig99)" in md
    # the time table: this run's time, no reference time (tiny's has no fig99), the plan's
    # paper-preset estimate priced as fig8's
    cells = [line.strip("| ").split(" | ") for line in md.splitlines() if line.startswith("| fig")]
    ran = [
        c
        for c in cells
        if len(c) == 4 and (c[1].endswith("records measured)") or c[1] == "no records")
    ]
    times = {c[0]: c for c in ran}
    assert times["fig99"][1:3] == ["0 s (15 records measured)", "not in the reference run"]
    assert times["fig99"][3] == times["fig8"][3] != ""
