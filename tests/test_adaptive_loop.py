"""--adaptive: the stopping rule in the run loop (artifact.rank.adaptive, runner.pending).

The decision from a pilot's records (hand-made, with real-looking compute times), fig8
end to end on 2 gloo processes (the pilot, stopping.json, the repetitions it decided,
a resume that changes nothing), and summarize's Stein floor. The rule itself:
test_stopping.py; its coverage: test_coverage.py."""

import json
import math

import numpy as np
import pandas as pd
import pytest

from artifact.analyze import stopping
from artifact.analyze.aggregate import summarize
from artifact.figures import spec_of
from artifact.rank import adaptive
from artifact.store import RunStore

CONFIG = "matmul-256_fp32_allreduce_4MiB_w2"  # fig8's tiny configuration on 2 ranks
SETTINGS = {"parallelism": "allreduce", "precision": "fp32", "gpu": "cpu"}


def _write(store: RunStore, overlap, sequential, figure="fig8", config_id=CONFIG, config=None):
    """One record a (mode, repetition): compute and E2E times in ms."""
    for mode, values in (("overlap", overlap), ("sequential", sequential)):
        for rep, v in enumerate(values):
            store.write_record(
                figure=figure,
                config_id=config_id,
                config=config or SETTINGS,
                mode=mode,
                rep=rep,
                metrics={"compute_ms": v, "e2e_ms": v * 1.3},
                units={"compute_ms": "ms", "e2e_ms": "ms"},
                provenance={},
            )


def _half_width(records, figure="fig8", metric="slowdown") -> float:
    rows = summarize(records, {figure: spec_of(figure).derived})
    r = rows[(rows["mode"] == "derived") & (rows["metric"] == metric)].iloc[0]
    return (r.ci_high - r.ci_low) / 2


SEQUENTIAL = [10.02, 9.98, 10.01, 10.00, 9.99]
NARROW = [11.03, 10.98, 11.01, 11.00, 10.99]  # Eq. 1 = +10 %, +-0.3 points
NOISY = [11.9, 10.2, 12.4, 9.6, 11.1]  # Eq. 1 = +10 %, +-15 points


def test_a_narrow_pilot_stops_at_five_a_noisy_one_runs_more(tmp_path):
    narrow, noisy = RunStore(tmp_path / "narrow"), RunStore(tmp_path / "noisy")
    _write(narrow, NARROW, SEQUENTIAL)
    _write(noisy, NOISY, SEQUENTIAL)
    # the smallest tolerance of expected/'s Eq. 1 numbers (fig4's compute slowdown: 0.05)
    d = adaptive.decide(narrow.records(), "fig8", max_reps=25)
    hw = _half_width(narrow.records())
    assert 0 < hw < 0.01
    assert d["pilot"]["slowdown"] == [pytest.approx(hw), 0.05]
    assert (d["n"], d["max"]) == (5, 25) and d["why"].startswith("slowdown sets it")
    assert d["modes"] == {"slowdown": ["derived"]}

    d = adaptive.decide(noisy.records(), "fig8", max_reps=25)
    hw = _half_width(noisy.records())
    assert hw > 0.1  # Stein's N: (t4 x s / 0.0125)^2, over 25
    assert d["pilot"]["slowdown"] == [pytest.approx(hw), 0.05]
    assert d["n"] == 25 and "25 (the run's maximum) do not bring" in d["why"]
    # between the two: N is Stein's size, not the maximum
    d = adaptive.decide(noisy.records(), "fig8", max_reps=10_000)
    s = stopping.spread_of(hw)
    assert d["n"] == math.ceil((stopping.T_PILOT * s / (0.05 / 4)) ** 2) < 10_000


def test_only_the_pilot_decides_and_unjudged_configurations_stop_at_five(tmp_path):
    store = RunStore(tmp_path)
    _write(store, [*NARROW, 30.0, 2.0], [*SEQUENTIAL, 10.0, 10.0])  # reps 5, 6: wild
    assert adaptive.decide(store.records(), "fig8", 25)["n"] == 5
    # the contention map: no item of expected/ is judged from it
    other = RunStore(tmp_path / "contention")
    _write(other, NOISY, SEQUENTIAL, figure="contention")
    d = adaptive.decide(other.records(), "contention", 25)
    assert (d["n"], d["why"], d["pilot"]) == (5, adaptive.NOT_JUDGED, {})
    # no room: the preset's 5 (or fewer) repetitions are the whole run, and it says so
    d = adaptive.decide(store.records(), "fig8", 5)
    assert d["n"] == 5 and "no room to adapt" in d["why"]


def test_the_seam_replaces_every_tolerance(tmp_path, monkeypatch):
    store = RunStore(tmp_path)
    _write(store, NOISY, SEQUENTIAL)
    monkeypatch.setenv(adaptive.TOLERANCE_ENV, "1000")
    assert adaptive.decide(store.records(), "fig8", 25)["n"] == 5
    monkeypatch.setenv(adaptive.TOLERANCE_ENV, "1e-9")
    assert adaptive.decide(store.records(), "fig8", 7)["n"] == 7


def test_summarize_widens_a_stopped_quantity_to_steins_interval(tmp_path):
    from artifact.analyze.summarize import STEIN, write_summary

    store = RunStore(tmp_path)
    # six repetitions that came out tight, after a pilot whose spread was wider
    _write(store, [*NARROW, 11.0], [*SEQUENTIAL, 10.0])
    _write(store, NARROW, SEQUENTIAL, config_id="fixed")  # no decision: left as it is
    plain = summarize(store.records(), {"fig8": spec_of("fig8").derived})
    pilot_hw = 0.03
    store.write_stopping(
        "fig8",
        CONFIG,
        {"n": 6, "max": 25, "why": "x", "pilot": {"slowdown": [pilot_hw, 0.05]},
         "modes": {"slowdown": ["derived"]}, "rule": adaptive.RULE},
    )  # fmt: skip
    summary = write_summary(tmp_path)
    assert pd.read_csv(tmp_path / "summary.csv")["ci_method"].str.contains("Stein").sum() == 1

    def row(df, config_id, metric="slowdown"):
        return df[(df["config_id"] == config_id) & (df["metric"] == metric)].iloc[0]

    before, after = row(plain, CONFIG), row(summary, CONFIG)
    low, high = stopping.stein_interval(
        before["mean"], before["ci_low"], before["ci_high"], stopping.spread_of(pilot_hw), 6
    )
    half = stopping.T_PILOT * stopping.spread_of(pilot_hw) / np.sqrt(6)
    assert (after["ci_low"], after["ci_high"]) == pytest.approx((low, high))
    assert (low, high) == pytest.approx((before["mean"] - half, before["mean"] + half))
    assert after["ci_high"] - after["ci_low"] > 2 * (before["ci_high"] - before["ci_low"])
    assert after["ci_method"] == f"{before['ci_method']}; {STEIN}"
    # the configuration's other quantities, and the one without a decision, keep theirs
    for config_id, metric in ((CONFIG, "sequential_penalty"), ("fixed", "slowdown")):
        a, b = row(summary, config_id, metric), row(plain, config_id, metric)
        assert (a["ci_low"], a["ci_high"], a["ci_method"]) == (b["ci_low"], b["ci_high"], b["ci_method"])  # fmt: skip


@pytest.mark.slow
def test_fig8_adaptive_runs_the_pilot_decides_once_and_resumes(tmp_path):
    """2 gloo processes: a narrow decision (the seam's large tolerance) stops the
    configuration at 5 of 7; an identical run, and one whose ranks start again (status
    removed) with a seam that would decide otherwise, change nothing."""
    from tests.conftest import run_cli

    out = tmp_path / "out"
    args = ("run", "fig8", "--preset", "tiny", "--reps", "7", "--adaptive", "--out", str(out))
    narrow = {adaptive.TOLERANCE_ENV: "1000"}
    res = run_cli(*args, env=narrow)
    assert res.returncode == 0, res.stdout + res.stderr
    path = RunStore(out).stopping_path("fig8", CONFIG)
    decision = json.loads(path.read_text())
    assert (decision["n"], decision["max"]) == (5, 7)
    assert decision["why"].startswith("slowdown sets it") and decision["rule"] == adaptive.RULE
    assert f"{CONFIG}: 5 of 7 repetitions: slowdown sets it" in res.stdout
    phases = sorted(p for p in path.parent.iterdir() if p.is_dir())
    assert len(phases) == 7
    for phase in phases:
        assert len(list(phase.glob("rep-*.json"))) == decision["n"], phase
    record = json.loads((phases[0] / "rep-004.json").read_text())
    assert record["adaptive"] == {"max_reps": 7, "decision": "../stopping.json"}
    status = json.loads((out / "status" / "fig8.json").read_text())
    assert "1 of 1 stopped before the maximum" in status["reason"]
    assert status["stopped"][CONFIG] == adaptive.shown(decision)
    summary = pd.read_csv(out / "summary.csv")
    slowdown = summary[summary["metric"] == "slowdown"].iloc[0]
    assert slowdown["n"] == 5 and "Stein" in slowdown["ci_method"]

    def files():
        return {p: p.stat().st_mtime_ns for p in (out / "records").rglob("*") if p.is_file()}

    seen = files()
    res = run_cli(*args, env=narrow)
    assert res.returncode == 0, res.stdout + res.stderr
    assert files() == seen
    (out / "status" / "fig8.json").unlink()  # the ranks start, find the decision, skip
    res = run_cli(*args, env={adaptive.TOLERANCE_ENV: "1e-9"})
    assert res.returncode == 0, res.stdout + res.stderr
    assert files() == seen
    assert "all 5 repetitions on disk, skipped" in (out / "logs" / "fig8.log").read_text()


def test_the_beacon_says_up_to_the_maximum_until_decided(tmp_path):
    import dataclasses

    from artifact.core.options import RunOptions
    from artifact.launch.progress import State
    from tests.conftest import cpu_context

    ctx = cpu_context(tmp_path, "fig8", reps=7)
    assert ctx.rep_fields(1) == {"rep_k": 2, "rep_n": 7} and ctx.record_extra() == {}
    ctx = dataclasses.replace(ctx, options=RunOptions(adaptive=True))
    assert ctx.rep_fields(1) == {"rep_k": 2, "rep_n": 7, "rep_upto": True}
    state = State("fig8", 7, 0.0)
    state.update({"config_k": 1, "config_n": 1, **ctx.rep_fields(1)}, 1.0)
    assert "rep 2/up to 7" in state.where()
    ctx.decided = 5
    assert ctx.rep_fields(4) == {"rep_k": 5, "rep_n": 5, "rep_upto": False}
    state.update({"config_k": 1, "config_n": 1, **ctx.rep_fields(4)}, 2.0)
    assert "rep 5/5" in state.where()


def test_one_gpu_alone_stops_at_five_whatever_its_pilot(tmp_path):
    """World size 1 (not emulated): nothing moves, compare judges no item of expected/
    from it, so no repetition past the pilot buys a verdict; emulated rank 0 of 4 is
    judged (a preview) and goes on."""
    alone, emulated = RunStore(tmp_path / "alone"), RunStore(tmp_path / "e4")
    _write(alone, NOISY, SEQUENTIAL, config={**SETTINGS, "world_size": 1})
    _write(emulated, NOISY, SEQUENTIAL, config={**SETTINGS, "world_size": 4, "emulated_world": 4})
    d = adaptive.decide(alone.records(), "fig8", 25)
    assert (d["n"], d["why"], d["pilot"]) == (5, adaptive.ALONE, {})
    assert adaptive.decide(emulated.records(), "fig8", 25)["n"] == 25


def _fig4_power(store: RunStore, gpu: str) -> None:
    """fig4's GPT-3 1.3B ZeRO-3 rows: Eq. 1 narrow, the overlap mode's mean power noisy
    (an H100-only item, h100_small_power, judges it with a tolerance of 10 % of TDP)."""
    config = {"model": "gpt3-1.3b", "parallelism": "fsdp", "precision": "fp16", "world_size": 4}
    for mode, values in (("overlap", NARROW), ("sequential", SEQUENTIAL), ("nocomm", SEQUENTIAL)):
        for rep, v in enumerate(values):
            store.write_record(
                figure="fig4", config_id="gpt3-1.3b_fsdp_fp16_mb8_w4", config=config,
                mode=mode, rep=rep,
                metrics={"compute_ms": v, "e2e_ms": v * 1.3, "power_mean_pct_tdp": [30, 50, 20, 60, 40][rep]},
                units={"compute_ms": "ms", "e2e_ms": "ms", "power_mean_pct_tdp": "%"},
                provenance={"gpu_model": gpu},
            )  # fmt: skip


def test_an_item_for_another_gpu_does_not_hold_a_configuration_back(tmp_path):
    h100, h200 = RunStore(tmp_path / "h100"), RunStore(tmp_path / "h200")
    _fig4_power(h100, "NVIDIA H100 80GB HBM3")
    _fig4_power(h200, "NVIDIA H200")
    on_h100 = adaptive.decide(h100.records(), "fig4", 25)
    assert on_h100["n"] == 25 and on_h100["why"].startswith("power_mean_pct_tdp sets it")
    on_h200 = adaptive.decide(h200.records(), "fig4", 25)
    assert "power_mean_pct_tdp" not in on_h200["pilot"] and on_h200["n"] < 25
