"""A figure is its spec: the spec's sweep (artifact/figures/sweeps.py) is the one list of
its configurations, which the plan prices and the experiment walks; its params are
checked before anything starts; a figure in a folder of its own needs nothing else."""

import dataclasses
import json
import os
import subprocess
import sys
from types import SimpleNamespace

import pytest
import torch

from artifact.core.config import get_preset
from artifact.core.emulated import EMULATION_OPTIONS
from artifact.core.errors import ArtifactError
from artifact.core.options import RunOptions
from artifact.estimate import model
from artifact.figures import EXTRA_ENV, REGISTRY, own_records, spec_of, sweeps
from tests.conftest import ROOT, tree

# (preset, ranks): a CPU's gloo processes; one GPU (the proxies) and four (the controls)
WHERE = [("tiny", 2), ("quick", 1), ("quick", 4), ("review", 4), ("paper", 1), ("paper", 4)]


def planned_ids(figure: str, preset: str, world: int) -> list[str]:
    """The configuration ids the plan prices for the figure alone."""
    rows = model.build(get_preset(preset), [figure], world, 80.0)
    return [r.config_id for r in rows if r.fits is not None]


class _Walked(Exception):
    """Raised by the stand-in measurement loops: the run's list is known."""


def walked_ids(
    figure: str, preset: str, world: int, monkeypatch, options: RunOptions | None = None
) -> list[str]:
    """The configuration ids the figure's experiment hands its measurement loops (and
    those it records "not run" first), on a stand-in context of this machine: the loops
    are replaced, so nothing is built or measured."""
    from artifact.experiments import contention, fig7, fig8, fig9, training, v2

    p = get_preset(preset)
    cuda = p.device != "cpu"
    seen: list[str] = []

    def loop(ctx, configs, *args, **kwargs):
        seen.extend(c.config_id for c in configs)

    monkeypatch.setattr(training, "run_configs", loop)
    monkeypatch.setattr(fig8, "run_configs", loop)
    monkeypatch.setattr(fig7, "pending", lambda ctx, configs, phases: loop(ctx, configs) or [])
    monkeypatch.setattr(contention, "record_not_run", lambda ctx, cid, why: seen.append(cid))
    monkeypatch.setattr(contention, "_refusal", lambda ctx, mech: mech.refused)
    probe = SimpleNamespace(calibrate=lambda warmup: 4, t_compute_s=0.01, close=lambda: None)
    monkeypatch.setattr(v2, "Microbench", lambda spec, device, seed: probe)
    monkeypatch.setattr(v2, "broadcast", lambda x: x)
    monkeypatch.setattr(fig9.caps, "open_setter", lambda index: SimpleNamespace(name="fake"))
    telemetry = SimpleNamespace(
        name="nvml" if cuda else "none",
        power_limit_w=lambda: 700.0,
        limit_range_w=lambda: (200.0, 700.0),
    )
    ctx = SimpleNamespace(
        figure=figure,
        preset=p,
        world_size=world,
        rank=0,
        is_writer=False,
        device=torch.device("cuda" if cuda else "cpu"),
        provenance={"gpu_model": sweeps.PLANNED_GPU if cuda else None},
        options=options or RunOptions(),
        power_backend=telemetry,
        gpu_index=0,
        warmup=1,
    )
    spec_of(figure).run(ctx)
    return seen


@pytest.mark.parametrize(("preset", "world"), WHERE)
@pytest.mark.parametrize("figure", own_records())
def test_the_plan_prices_the_configurations_the_run_walks(figure, preset, world, monkeypatch):
    """For every figure and preset, the ids of the plan's rows are the ids the experiment
    walks, in its order (fig6 and fig7 run none on a CPU, fig9 none without
    --allow-power-cap: the plan then prices one row with no configuration)."""
    planned = planned_ids(figure, preset, world)
    assert planned == walked_ids(figure, preset, world, monkeypatch)
    assert len(set(planned)) == len(planned)


EMULATING = [f for f in own_records() if spec_of(f).options >= EMULATION_OPTIONS]


@pytest.mark.parametrize("preset", ["quick", "paper"])
@pytest.mark.parametrize("figure", EMULATING)
def test_the_emulated_plan_prices_the_configurations_the_emulated_run_walks(
    figure, preset, monkeypatch
):
    """`plan --emulate-world 4` and `run --emulate-world 4`: rank 0 of 4 alone, ids '_e4'."""
    from artifact import plan

    rows = plan.emulated_plan(get_preset(preset), [figure], 4, 80.0)
    planned = [r.config_id for r in rows if r.fits is not None]
    emulated = RunOptions(emulate_world=4)
    assert planned == walked_ids(figure, preset, 4, monkeypatch, emulated)
    assert planned and all(cid.endswith("_e4") for cid in planned)


def test_plan_equals_run_would_catch_a_sweep_the_experiment_does_not_walk(monkeypatch):
    """The check above can fail: a sweep with one more precision than the experiment runs."""
    walked = walked_ids("fig11", "paper", 1, monkeypatch)
    widened = dataclasses.replace(
        REGISTRY["fig11"], params={"precisions": ("fp32", "tf32", "bf16")}
    )
    monkeypatch.setitem(REGISTRY, "fig11", widened)
    extra = set(planned_ids("fig11", "paper", 1)) - set(walked)
    assert extra and all("_bf16_" in c for c in extra)


def test_the_sweeps_are_torch_free_and_the_plan_counts_them():
    """The registry's own counts: each figure's configurations are its sweep's, priced one
    row each (the start-up row aside)."""
    code = (
        "import sys; from artifact.figures import REGISTRY; from artifact.core.config import "
        "get_preset; n = sum(len(s.configs(get_preset('paper'))) for s in REGISTRY.values() "
        "if s.experiment); assert 'torch' not in sys.modules; print(n)"
    )
    res = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    paper = get_preset("paper")
    rows = model.build(paper, own_records(), 1, 80.0)
    for fig in own_records():
        configs = spec_of(fig).configs(paper)
        assert len([r for r in rows if r.figure == fig and r.fits is not None]) == len(configs)
    assert int(res.stdout) == sum(len(spec_of(f).configs(paper)) for f in own_records())


def test_models_flag_still_wins_over_the_presets_precision_models():
    review = get_preset("review")
    where = sweeps.Where(review, 1, "cuda", options=RunOptions(models=("gpt3-13b",)))
    assert [p.config_id for p in sweeps.precision_sweep(where, ("fp32",))] == [
        "gpt3-13b_fsdp_fp32_mb8_w1_rc"  # recomputation on: 13B in FP32 needs it
    ]
    plain = sweeps.precision_sweep(sweeps.Where.planned(review), ("fp32",))
    assert [p.model for p in plain] == list(review.precision_models)


# --- params: bound to the sweep's and the experiment's signatures ----------------------


def test_a_misspelt_param_is_one_line_naming_it_and_the_accepted_ones(monkeypatch):
    misspelt = dataclasses.replace(REGISTRY["fig10"], params={"precision": ("fp32",)})
    monkeypatch.setitem(REGISTRY, "fig10", misspelt)
    with pytest.raises(ArtifactError) as e:
        spec_of("fig10")
    assert str(e.value) == (
        "fig10: unknown param 'precision' of sweep 'precision_sweep'; accepted: precisions"
    )
    with pytest.raises(ArtifactError, match="missing param 'precisions'"):
        monkeypatch.setitem(REGISTRY, "fig10", dataclasses.replace(misspelt, params={}))
        spec_of("fig10")


def test_the_experiments_run_is_bound_too(monkeypatch):
    """A sweep that takes a param its experiment's run(ctx) does not: refused where the
    CLI loads the experiment, before the ranks start."""
    monkeypatch.setitem(sweeps.SWEEPS, "fig8", lambda where, colour: [])
    coloured = dataclasses.replace(REGISTRY["fig8"], params={"colour": "red"})
    monkeypatch.setitem(REGISTRY, "fig8", coloured)
    assert spec_of("fig8").configs(get_preset("quick")) == []  # the sweep takes it
    with pytest.raises(ArtifactError) as e:
        spec_of("fig8").module()
    assert str(e.value) == ("fig8: unknown param 'colour' of experiment 'fig8'; accepted: none")


# --- a figure in a folder of its own (figures.EXTRA_ENV) ------------------------------

THROWAWAY = '''"""Fig. 99: a throwaway figure, FP32 alone over the precision sweep."""

from artifact.figures import derived
from artifact.figures.spec import TRAINING_OPTIONS, FigureSpec

SPEC = FigureSpec(
    name="fig99",
    title="Fig. 99: a throwaway figure",
    experiment="precision_sweep",
    params={PARAMS},
    options=TRAINING_OPTIONS,
    derived=derived.TRAINING,
    panels=(derived.SLOWDOWN_PANEL,),
    expected="fig99.yaml",
)
'''

THROWAWAY_YAML = """
figure: fig99
claims:
  - id: throwaway_fp32_slower_under_overlap
    statement: "compute runs slower under overlap than in sequence"
    kind: every_row_positive
    metric: slowdown
    rows: {figure: fig99, mode: derived}
    source: {section: "none", figure: "Fig. 99"}
    scope: any
"""


def _folder(tmp_path, params: str):
    folder = tmp_path / "figures"
    folder.mkdir()
    (folder / "fig99.py").write_text(THROWAWAY.replace("{PARAMS}", params))
    (folder / "fig99.yaml").write_text(THROWAWAY_YAML)
    return {EXTRA_ENV: str(folder)}


# what no run may touch: environments and caches aside, every file of the tree (the images
# copy no .git, so git status cannot say)
UNWATCHED = {".git", "__pycache__", ".pytest_cache", ".ruff_cache"}


def _repository_state() -> dict[str, tuple[int, int]]:
    state = {}
    for folder, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if d not in UNWATCHED and not d.startswith((".venv", ".nox"))]
        for name in files:
            st = os.stat(os.path.join(folder, name))
            state[os.path.relpath(os.path.join(folder, name), ROOT)] = (st.st_size, st.st_mtime_ns)
    return state


@pytest.mark.slow  # over 1.5 s on 2 cores (a CLI process, or a long simulation)
def test_a_throwaway_figure_is_planned_with_its_own_configurations(cli, tmp_path):
    """Its spec's params decide its sweep: FP32 alone over tiny's two models, 2
    configurations (fig10's sweep has 3 precisions, 6), priced with its experiment's
    calibration (fig10's: reference.stand_in)."""
    env = _folder(tmp_path, '{"precisions": ("fp32",)}')
    res = cli("plan", "fig99", "--preset", "tiny", "--json", env=env)
    assert res.returncode == 0, res.stderr
    rows = [r for r in json.loads(res.stdout)["rows"] if r["figure"] == "fig99"]
    tiny = get_preset("tiny")
    assert [r["config_id"] for r in rows] == [f"{m}_fsdp_fp32_mb2_w2" for m in tiny.models]
    assert all("priced with fig10's calibration" in r["note"] for r in rows)
    listed = cli("plan", "--preset", "tiny", "--summary", env=env).stdout
    assert "fig99" in listed and "fig99" not in cli("plan", "--preset", "tiny", "--summary").stdout
    assert "fig99 (default: all)" in cli("plan", "--help", env=env).stdout


@pytest.mark.slow  # over 1.5 s on 2 cores (a CLI process, or a long simulation)
def test_a_throwaway_figure_with_a_misspelt_param_starts_nothing(cli, tmp_path):
    env = _folder(tmp_path, '{"precision": ("fp32",)}')
    out = tmp_path / "out"
    res = cli("run", "fig99", "--out", str(out), env=env)
    assert res.returncode == 2
    (line,) = res.stderr.strip().splitlines()  # one line, naming the file and the param
    assert line.startswith("error: ") and line.endswith(
        "fig99.py: fig99: unknown param 'precision' of sweep 'precision_sweep'; accepted: precisions"
    )
    assert not out.exists()  # no folder, no log, no rank
    plan = cli("plan", "fig99", "--preset", "tiny", env=env)
    assert plan.returncode == 2 and "unknown param 'precision'" in plan.stderr


@pytest.mark.slow
def test_a_throwaway_figure_runs_compares_and_reports_touching_no_file(cli, tmp_path):
    """Its spec and its YAML in a folder of their own: run at tiny on the CPU (one
    repetition), its records summarised, its claim judged, its section in the report; the
    repository is as it was."""
    before = _repository_state()
    env = _folder(tmp_path, '{"precisions": ("fp32",)}')
    out = tmp_path / "out"
    res = cli("run", "fig99", "--preset", "tiny", "--reps", "1", "--out", str(out), env=env)
    assert res.returncode == 0, res.stderr[-3000:]
    tiny = get_preset("tiny")
    ran = sorted(p.name for p in (out / "records" / "fig99").iterdir())
    assert ran == sorted(f"{m}_fsdp_fp32_mb2_w2" for m in tiny.models)
    assert cli("compare", str(out), env=env).returncode == 0
    verdicts = (out / "verdicts.csv").read_text()
    assert "throwaway_fp32_slower_under_overlap" in verdicts
    assert cli("report", str(out), env=env).returncode == 0
    md = (out / "report" / "appendix.md").read_text()
    assert "Fig. 99: a throwaway figure (fig99)" in md
    after = _repository_state()
    changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    assert not changed, changed[:10]
    assert "fig99" not in " ".join(tree(ROOT / "artifact" / "figures"))
