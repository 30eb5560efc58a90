"""benchmarks/emulated_memory.py (issue 31): rank 0's peak at W beside the estimate.

On a CPU there is no peak to read; these tests check the plumbing the GPU session relies
on: a row for every training configuration with the estimate the run gates on, the
reasons for what is not run, the time bound, the resume and the refusals."""

import dataclasses
import importlib.util
import json
import subprocess
from types import SimpleNamespace

import pytest
import torch

from artifact.core.config import get_model, get_preset
from artifact.core.units import GIB
from artifact.estimate import memory
from tests.conftest import ROOT, run_benchmark

SCRIPT = ROOT / "benchmarks" / "emulated_memory.py"

# fp16 and bf16 refused through the capability seam, whatever this CPU's oneDNN can do
# (AMX CPUs run both): two configurations run (fp32), not four
ENV = {"ARTIFACT_PRECISION_SUPPORT": "fp16=no,bf16=no"}


def bench(*args: str) -> subprocess.CompletedProcess:
    return run_benchmark("emulated_memory", *args, env=ENV)


def rows(path) -> dict[str, dict]:
    return {r["config_id"]: r for r in json.loads(path.read_text())["rows"]}


def tiny_configurations(world: int) -> dict[str, float]:
    """Every training configuration of the tiny preset at W (Figs. 4, 10, 11; fig10's FP32
    is fig11's), with its estimate, from artifact.estimate.memory directly (tiny never
    turns recomputation on)."""
    preset = get_preset("tiny")
    assert preset.recompute_above_gib is None
    out = {}
    mb = preset.micro_batches[0]
    for name in preset.models:
        m = dataclasses.replace(get_model(name), seq_len=preset.seq_len or get_model(name).seq_len)
        for p in ("fp32", "fp16", "bf16", "tf32"):
            out[f"{name}_fsdp_{p}_mb{mb}_w{world}_e{world}"] = (
                memory.fsdp_bytes(m, mb, p, world) / GIB
            )
        nmb = preset.global_batch // mb
        pipe = memory.pipeline_bytes(m, mb, nmb, "fp32", world, materialised_attention=False)
        out[f"{name}_pipeline_fp32_mb{mb}_w{world}_e{world}"] = pipe / GIB
    return out


@pytest.fixture(scope="module")
def first_runs(tmp_path_factory):
    """A run stopped by --seconds before any configuration could finish, then the rest."""
    out = tmp_path_factory.mktemp("mem") / "memory.json"
    stopped = bench("--preset", "tiny", "--world", "2", "--out", str(out), "--seconds", "1")
    partial = rows(out) if out.exists() else {}
    full = bench("--preset", "tiny", "--world", "2", "--out", str(out))
    return out, stopped, partial, full


@pytest.mark.slow  # two DeepSpeed processes under the fake group
def test_every_tiny_configuration_has_its_row_and_estimate(first_runs):
    out, _, _, full = first_runs
    assert full.returncode == 0, full.stderr[-3000:]
    got = rows(out)
    expected = tiny_configurations(2)
    assert set(got) == set(expected)
    for cid, row in got.items():
        assert row["estimate_gib"] == pytest.approx(expected[cid], rel=1e-9), cid
        assert row["world"] == 2 and row["peak_allocated_gib"] is None, cid
        assert row["ratio"] is None and row["peak_reserved_gib"] is None, cid
    status = {cid: (r["status"], r["reason"]) for cid, r in got.items()}
    for cid, (state, reason) in status.items():
        if "_pipeline_" in cid:
            assert state == "refused" and "--emulate-world" in reason
        elif "_fp32_" in cid:  # ran under the fake group; no counter to read
            assert (state, reason) == ("ran", "no device memory counter on CPU")
        else:  # fp16 and bf16: the seam; tf32: no CPU has it
            assert state == "refused" and ("not supported" in reason or "TF32" in reason), cid
    assert got["gpt-tiny_fsdp_fp32_mb2_w2_e2"]["figures"] == ["fig4", "fig10", "fig11"]
    assert "no peak measured yet" in full.stdout


@pytest.mark.slow
def test_the_time_bound_keeps_finished_rows_and_a_rerun_finishes(first_runs):
    _, stopped, partial, full = first_runs
    assert stopped.returncode == 0, stopped.stderr[-3000:]
    assert "stopped: --seconds 1 reached" in stopped.stdout
    # what finished before the first run to be measured (none can in 1 s) is kept as it was
    assert partial and all(r["status"] != "ran" for r in partial.values())
    done = rows(first_runs[0])
    assert all(done[cid] == row for cid, row in partial.items())
    assert full.stdout.count("kept from") == len(partial)


@pytest.mark.slow
def test_a_rerun_redoes_nothing(first_runs):
    out, _, _, _ = first_runs
    before = out.read_text()
    again = bench("--preset", "tiny", "--world", "2", "--out", str(out))
    assert again.returncode == 0, again.stderr[-3000:]
    assert out.read_text() == before  # elapsed times and all
    assert again.stdout.count("kept from") == len(rows(out))


@pytest.mark.parametrize(
    "flags, named",
    [
        (["--preset", "huge"], "'huge'; accepted: tiny, quick, rehearsal, review, paper"),
        (["--preset", "tiny", "--world", "1"], "--world '1' is not accepted; accepted: an integer"),
        (["--preset", "tiny", "--figures", "fig4,fig8"], "'fig8'; accepted: fig4, fig10, fig11"),
    ],
)
def test_bad_input_is_one_line_exit_2_and_nothing_written(tmp_path, flags, named):
    out = tmp_path / "memory.json"
    r = bench(*flags, "--out", str(out))
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [r.stderr.strip()] and named in r.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow  # over 1.5 s on 2 cores (a CLI process, or a long simulation)
def test_a_configuration_above_the_device_memory_is_recorded_not_run(tmp_path):
    out = tmp_path / "memory.json"
    r = bench("--preset", "tiny", "--world", "2", "--out", str(out), "--gpu-memory-gib", "0.5")
    assert r.returncode == 0, r.stderr[-3000:]
    got = rows(out)
    assert set(got) == set(tiny_configurations(2))
    for cid, row in got.items():
        if "_pipeline_" not in cid:  # the pipeline's refusal comes first
            why = f"estimate {row['estimate_gib']:.1f} GiB + 10% does not fit 0.5 GiB"
            assert (row["status"], row["reason"]) == ("does not fit", why), cid


def _script():
    spec = importlib.util.spec_from_file_location("emulated_memory", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_configuration_within_the_memory_but_not_its_margin_is_not_run():
    """The benchmark gates as the run does (memory.fits): an estimate 4 % below the device's
    memory, as the one that ran out of memory on an H200, is recorded without a run."""
    em = _script()
    point = SimpleNamespace(config={})
    cpu = torch.device("cpu")
    row = {"estimate_gib": 134.2, "precision": "fp32"}
    assert em.not_run(point, row, cpu, 139.8) == {
        "status": "does not fit",
        "reason": "estimate 134.2 GiB + 10% does not fit 139.8 GiB",
    }
    assert em.not_run(point, {**row, "estimate_gib": 114.2}, cpu, 139.8) is None


def test_the_table_lists_peaks_more_than_10_percent_off_and_out_of_memory():
    """What the GPU session reads at the end, from rows as a GPU writes them."""
    em = _script()

    def row(cid, status, estimate, peak):
        ratio = peak / estimate if status == "ran" and peak is not None else None
        reserved = None if peak is None else peak + 1
        return {"config_id": cid, "status": status, "estimate_gib": estimate,
                "peak_allocated_gib": peak, "peak_reserved_gib": reserved, "ratio": ratio,
                "reason": "", "elapsed_s": 30.0}  # fmt: skip

    table = [
        row("within", "ran", 40.0, 43.9),
        row("above", "ran", 40.0, 44.1),
        row("below", "ran", 40.0, 35.9),
        row("oom", "oom", 70.0, 79.5),
        row("cpu", "ran", 1.0, None),
        row("big", "does not fit", 150.0, None),
    ]
    text = em.table(table)
    listed = [x.split("|")[1].strip() for x in text.splitlines() if x.startswith("| ")][1:]
    assert listed == ["above", "below", "oom"], text
    assert "3 of 4 measured rows" in text and "| out of memory |" in text
    assert "x1.10" in em.line(table[1]) and "peak 79.5 GiB" in em.line(table[3])
    assert em.table(table[:1]).startswith("every measured peak (1) within 10 %")
    assert em.table(table[4:]).startswith("no peak measured yet")


@pytest.mark.slow
def test_redo_failed_runs_the_failed_rows_again_and_keeps_the_rest(first_runs, tmp_path):
    out = tmp_path / "memory.json"
    doc = json.loads(first_runs[0].read_text())
    failed = "gpt-tiny_fsdp_fp16_mb2_w2_e2"  # refused through the seam: redone without a run
    for row in doc["rows"]:
        if row["config_id"] == failed:
            row.update(status="failed", reason="exit 1: a bug since fixed")
    out.write_text(json.dumps(doc))
    r = bench("--preset", "tiny", "--world", "2", "--out", str(out), "--redo-failed")
    assert r.returncode == 0, r.stderr[-3000:]
    assert rows(out)[failed]["status"] == "refused"
    assert {c: x for c, x in rows(out).items() if c != failed} == {
        c: x for c, x in rows(first_runs[0]).items() if c != failed
    }
    assert r.stdout.count("kept from") == len(doc["rows"]) - 1
