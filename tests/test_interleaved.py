"""Interleaved timed rounds (artifact/rank/runner.py, docs/measurement.md "Interleaved timed
rounds"): a slow spell of the host that lasts longer than one phase's pass biases
per-phase passes and not the rounds; the round-adjusted E2E compares phases within
rounds; each phase's power comes from its own iterations."""

import time

import numpy as np
import pandas as pd
import pytest

from artifact.core.phases import williams_rows
from artifact.measure import power, telemetry
from artifact.rank import runner
from artifact.store import RunStore
from tests.conftest import cpu_context, free_port

BASE_S = 0.04  # a step of 40 ms: a loaded host's sleep overshoots by a few ms
SPELL = 1.5  # a slow spell makes every step 50 % slower


class FakeClock:
    """The host clock the timings read (artifact.measure.timing.clock_from): a step
    advances it by its modelled duration instead of sleeping, so a busy machine's
    scheduling jitter cannot change what the test sees."""

    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def take(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def host_clock():
    from artifact.measure.timing import clock_from

    fake = FakeClock()
    with clock_from(fake):
        yield fake


def _host_with_a_slow_spell(first: int, last: int, base_s: float = BASE_S):
    """Steps of identical work; the host is slow from its `first` to its `last` step (a
    spell counted in steps, so the test does not depend on this machine's timing)."""
    count = [0]

    def step():
        slow = first <= count[0] <= last
        count[0] += 1
        time.sleep(base_s * (SPELL if slow else 1.0))

    return step


@pytest.mark.slow  # over 1.5 s on 2 cores (a CLI process, or a long simulation)
def test_a_slow_spell_biases_per_phase_passes_but_not_interleaved_rounds(tmp_path):
    """Two phases of the same work, 6 timed iterations each, and a slow spell over the
    second half of the steps. Timed one phase after the other, the second phase reads
    about +50 %; timed in interleaved rounds, both phases see the spell alike."""
    ctx = cpu_context(tmp_path, "fig4")
    step = _host_with_a_slow_spell(6, 11)
    first, _ = runner.timed_pass(ctx, step, 6, "a", with_power=False)
    second, _ = runner.timed_pass(ctx, step, 6, "b", with_power=False)
    blocked = np.median(second) / np.median(first) - 1
    assert blocked > 0.3

    # 1 settling round of 2 steps comes first; steps of 100 ms, as a starved host's wake-up
    # can be late by 10 ms (a round read +23 % at 40 ms inside a niced image build)
    step = _host_with_a_slow_spell(7, 12, base_s=0.1)
    timed, settled = runner.interleaved_timed_pass(
        ctx, {"a": step, "b": step}, rep=0, what="t", least=6, seconds=0.0, with_power=False
    )
    assert settled["settle_iters"] == 2 and len(timed["a"]["e2e_ms"]) == 6  # 1 round
    adjusted = runner.round_adjusted({p: v["e2e_ms"] for p, v in timed.items()})
    assert abs(adjusted["b"][0] / adjusted["a"][0] - 1) < 0.2  # against +50 % above


def test_rounds_follow_the_williams_rows(tmp_path):
    """Round r of repetition `rep` runs the phases in row rep + r of the design."""
    ctx_phases = ("overlap", "sequential", "overlap_repeat", "nocomm")
    seen: list[str] = []
    steps = {p: (lambda p=p: seen.append(p)) for p in ctx_phases}
    ctx = cpu_context(tmp_path, "fig4")
    runner.interleaved_timed_pass(
        ctx, steps, rep=1, what="t", least=4, seconds=0.0, with_power=False
    )
    rounds = [seen[i : i + 4] for i in range(4, len(seen), 4)]  # after 1 settling round
    rows = williams_rows(4)
    assert rounds == [[ctx_phases[i] for i in rows[(1 + r) % 4]] for r in range(4)]


def _jittery_host(every: int, extra: float, clock: FakeClock):
    """Identical work; every `every`-th step the host stalls for `extra` x a step (steps
    counted, and time taken from the fake clock: no dependence on this machine's timing)."""
    count = [0]

    def step():
        count[0] += 1
        clock.take(BASE_S * (1 + (extra if count[0] % every == 0 else 0.0)))

    return step


@pytest.mark.parametrize("extra, rounds", [(0.0, 4), (1.0, 10)])
def test_rounds_go_on_while_a_median_is_imprecise(tmp_path, extra, rounds, host_clock):
    """A quiet host stops at the least rounds; one whose steps stall at random (a third of
    them, by a whole step, as ZeRO-3's on one H200) goes on to the most."""
    ctx = cpu_context(tmp_path, "fig4")
    step = _jittery_host(3, extra, host_clock)
    timed, _ = runner.interleaved_timed_pass(
        ctx, {"a": step, "b": step}, rep=0, what="t", least=4, seconds=0.0,
        with_power=False, most=10, target_se=0.01,
    )  # fmt: skip
    assert len(timed["a"]["e2e_ms"]) == len(timed["b"]["e2e_ms"]) == rounds


def test_the_precision_rule_reads_the_medians_spread():
    """ZeRO-3's steps on one H200 (session 9): 236-243 ms, and 3 in 8 of them 10-60 ms
    slower; 8 such rounds leave a median known to about 2 %, not 0.5 %."""
    rng = np.random.default_rng(0)
    quiet = {p: list(240 + rng.normal(0, 0.5, 8)) for p in "ab"}
    stalls = np.zeros(8)
    jittery = {}
    for k, p in enumerate("ab"):
        stalls[:] = 0
        stalls[k::3] = rng.uniform(10, 60, len(stalls[k::3]))
        jittery[p] = list(240 + rng.normal(0, 1.5, 8) + stalls)
    assert runner.rounds_precise(quiet, 0.005)
    assert not runner.rounds_precise(jittery, 0.005)
    assert not runner.rounds_precise({p: v[:2] for p, v in quiet.items()}, 0.005)  # too few


def test_round_adjustment_removes_the_rounds_level():
    """Rounds whose level drifts by +-15 % (the host's spells), two phases 2 % apart with
    1 % noise each: over 400 simulated repetitions of 5 rounds, the adjusted ratio is
    centred on 1.02 and varies under 0.7 times as much as the ratio of raw medians (0.57
    at this seed)."""
    rng = np.random.default_rng(0)
    adjusted, raw = [], []
    for _ in range(400):
        level = 250 * (1 + 0.15 * rng.standard_normal(5))
        a = level * (1 + 0.01 * rng.standard_normal(5))
        b = level * 1.02 * (1 + 0.01 * rng.standard_normal(5))
        got = runner.round_adjusted({"a": list(a), "b": list(b)})
        adjusted.append(np.log(got["b"][0] / got["a"][0]))
        raw.append(np.log(np.median(b) / np.median(a)))
    assert np.exp(np.mean(adjusted)) == pytest.approx(1.02, abs=0.002)
    assert np.std(adjusted) < 0.7 * np.std(raw)


def _counter_samples(power_of, t_end_s: float, poll_s=0.02, refresh_s=0.1, offset_s=0.037):
    """A sampler's rows over a device whose power is `power_of(t)`: polled every 20 ms, the
    energy counter refreshed every 100 ms (as NVML's on an H200)."""
    dt = 1e-4
    grid = np.arange(0, t_end_s + dt, dt)
    energy = np.concatenate([[0.0], np.cumsum([power_of(t) * dt for t in grid[:-1]])])
    rows = []
    for t in np.arange(0, t_end_s, poll_s):
        last_refresh = offset_s + refresh_s * np.floor((t - offset_s) / refresh_s)
        e = float(np.interp(max(last_refresh, 0.0), grid, energy))
        rows.append((int(t * 1e9), power_of(t), power_of(t), e, 1980.0, 40.0))
    return pd.DataFrame(rows, columns=["t_ns", *power.FIELDS])


def test_each_phase_is_priced_by_its_own_iterations():
    """Phases of 250 ms alternate at 300 W and 600 W: each reads its own power within
    5 %; taken at the last poll before each end, the counter would mix its neighbours."""
    step = 0.25

    def power_of(t):
        return 300.0 if int(t / step) % 2 == 0 else 600.0

    samples = _counter_samples(power_of, 4.0)
    spans = {
        w: [(int(k * step * 1e9), int((k + 1) * step * 1e9)) for k in range(1, 14) if k % 2 == i]
        for i, w in enumerate((300.0, 600.0))
    }
    for watts, intervals in spans.items():
        got = telemetry.intervals_power(samples, intervals)
        assert got.mean_w == pytest.approx(watts, rel=0.05)
        assert got.peak_w == watts and got.seconds == pytest.approx(
            6 * step + step * (watts == 600)
        )
    t, e = samples["t_ns"].to_numpy(), samples["energy_j"].to_numpy()
    naive = (
        sum(
            e[np.searchsorted(t, b, "right") - 1] - e[np.searchsorted(t, a, "right") - 1]
            for a, b in spans[300.0]
        )
        / telemetry.intervals_power(samples, spans[300.0]).seconds
    )
    assert abs(naive / 300.0 - 1) > 0.15


def _fig10_records(store: RunStore, reps: int, precision: str = "fp32") -> dict:
    from artifact.core.phases import training_phases

    config = {"model": "gpt-tiny", "parallelism": "fsdp", "precision": precision, "note": ""}
    for rep in range(reps):
        for phase in training_phases(1):
            store.write_record(
                figure="fig10", config_id="gpt-tiny_fsdp_fp32_mb2_w1", config=config,
                mode=phase, rep=rep, metrics={"e2e_ms": 10.0 + rep}, units={"e2e_ms": "ms"},
                provenance={"preset": "tiny", "figure": "fig10"},
            )  # fmt: skip
    return config


def test_fig11_copies_fig10s_fp32_configuration_and_says_so(tmp_path):
    """A configuration fig10 measured in the same folder, every repetition, with the same
    settings: fig11 copies its records (marked and noted) instead of measuring it."""
    from artifact.core.phases import training_phases
    from artifact.rank import reuse

    ctx = cpu_context(tmp_path, "fig11", reps=2)
    config = _fig10_records(ctx.store, reps=2)
    point = runner.ConfigPoint("gpt-tiny_fsdp_fp32_mb2_w1", {**config, "note": "x"}, None)
    other = runner.ConfigPoint(point.config_id, {**config, "precision": "tf32"}, None)
    assert not reuse.reuse(ctx, other, training_phases(1))  # other settings
    assert not ctx.store.records("fig11")
    assert reuse.reuse(ctx, point, training_phases(1))
    copied = ctx.store.records("fig11")
    assert len(copied) == 2 * len(training_phases(1))
    assert {r["figure"] for r in copied} == {"fig11"} and {r["reused_from"] for r in copied} == {
        "fig10"
    }
    assert all("measured for fig10" in r["config"]["note"] for r in copied)
    assert sorted(r["metrics"]["e2e_ms"] for r in copied if r["mode"] == "overlap") == [10.0, 11.0]


def test_a_configuration_with_a_repetition_missing_is_measured_again(tmp_path):
    from artifact.core.phases import training_phases
    from artifact.rank import reuse

    ctx = cpu_context(tmp_path, "fig11", reps=3)
    config = _fig10_records(ctx.store, reps=2)  # fig10 ran 2 of the 3 repetitions
    point = runner.ConfigPoint("gpt-tiny_fsdp_fp32_mb2_w1", config, None)
    assert not reuse.reuse(ctx, point, training_phases(1))
    assert not ctx.store.records("fig11")


def test_timed_iterations_run_with_the_garbage_collector_paused(tmp_path):
    """Both kinds of timed pass pause Python's collector (a collection of ZeRO-3's heap
    stalls the host at moments no phase chooses) and restore it after."""
    import gc

    ctx = cpu_context(tmp_path, "fig4")
    seen = []
    step = lambda: seen.append(gc.isenabled())  # noqa: E731
    runner.timed_pass(ctx, step, 3, "a", with_power=False)
    runner.interleaved_timed_pass(
        ctx, {"a": step, "b": step}, rep=0, what="t", least=3, seconds=0.0, with_power=False
    )
    assert len(seen) == 3 + 2 * 4 and not any(seen)
    assert gc.isenabled()


def _ranks_decide_together(rank: int, port: int, results):
    import os

    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=2)
    try:
        import dataclasses

        from artifact.measure.timing import clock_from

        ctx = dataclasses.replace(cpu_context(results["out"], "fig4"), rank=rank, world_size=2)
        fake = FakeClock()
        step = _jittery_host(3, 1.0 if rank == 1 else 0.0, fake)  # only rank 1's host stalls
        with clock_from(fake):
            timed, _ = runner.interleaved_timed_pass(
                ctx, {"a": step, "b": step}, rep=0, what="t", least=4, seconds=0.0,
                with_power=False, most=8, target_se=0.01,
            )  # fmt: skip
        results[rank] = len(timed["a"]["e2e_ms"])
    finally:
        dist.destroy_process_group()


@pytest.mark.slow  # over 1.5 s on 2 cores (a CLI process, or a long simulation)
def test_every_rank_runs_as_many_rounds(tmp_path):
    """Two gloo processes, one quiet and one whose steps stall: both go on to the most
    rounds (a collective in every round must be met by every rank)."""
    import torch.multiprocessing as mp

    results = mp.Manager().dict({"out": str(tmp_path)})
    mp.spawn(_ranks_decide_together, args=(free_port(), results), nprocs=2, join=True)
    assert results[0] == results[1] == 8


def test_a_timed_pass_queues_its_iterations_with_no_synchronisation_between_them(
    tmp_path, monkeypatch, host_clock
):
    """The microbenchmark's timed pass (runner.timed_pass): one barrier and one
    device-wide synchronisation before it, none between iterations (the counting seams),
    so a device is never left idle while the host queues the next iteration; each
    iteration's time is its own step's."""
    from artifact.measure import timing

    ctx = cpu_context(tmp_path, "fig8")
    barriers = [0]
    monkeypatch.setattr(
        runner.RunContext, "barrier", lambda self: barriers.__setitem__(0, barriers[0] + 1)
    )
    sleeps = [0.01, 0.03] * 4

    def step():
        host_clock.take(sleeps[len(seen)])
        seen.append(1)

    seen: list[int] = []
    syncs = timing.SYNC_CALLS[0]
    e2e, _ = runner.timed_pass(ctx, step, len(sleeps), "q", with_power=False)
    assert barriers[0] == 1 and timing.SYNC_CALLS[0] - syncs == 1
    assert len(e2e) == len(sleeps)
    assert e2e == pytest.approx(sleeps)  # each iteration's own step, to the clock's tick


@pytest.mark.parametrize(("profiled_min_s", "profiled"), [(0.0, 5), (0.1, 3), (0.01, 1)])
def test_the_profiled_pass_is_sized_by_the_timed_step(tmp_path, profiled_min_s, profiled):
    """Training's profiled pass runs at least one iteration and the preset's profiled
    seconds at the timed step, at most its iterations (0 s: always those): 40 ms steps
    and 0.1 s profile 3 iterations a phase, where a 13B step of seconds profiles one. The
    plan prices the same count (Preset.profiled_iters)."""
    import dataclasses

    ctx = cpu_context(tmp_path, "fig4")
    ctx = dataclasses.replace(
        ctx, preset=dataclasses.replace(ctx.preset, profiled_min_s=profiled_min_s)
    )
    calls = {"a": 0, "b": 0}

    def step_of(phase):
        def step():
            calls[phase] += 1
            time.sleep(BASE_S)

        return step

    settings = runner.Settings(
        "c", {}, step_of, runner.BASE_UNITS, iters=5, timed_iters=2, interleave=True
    )
    runner.measure_repetition(ctx, settings, 0, ("a", "b"))
    records = {r["mode"]: r for r in ctx.store.records("fig4")}
    assert {m: r["metrics"]["profiled_iters"] for m, r in records.items()} == {
        "a": profiled,
        "b": profiled,
    }
    timed = records["a"]["metrics"]["timed_iters"]
    settle = records["a"]["metrics"]["settle_iters"] / 2
    # each phase: its settling and timed rounds, one step to switch in, then the profiled
    assert calls["a"] == settle + timed + 1 + profiled
    assert ctx.preset.profiled_iters(BASE_S, 5) == profiled
