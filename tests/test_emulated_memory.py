"""benchmarks/emulated_memory.py (issue 31): rank 0's peak at W beside the estimate.

On a CPU there is no peak to read; these tests check the plumbing the GPU session relies
on: a row for every training configuration with the estimate the run gates on, the
reasons for what is not run, the time bound, the resume and the refusals."""

import dataclasses
import json
import os
import subprocess
import sys

import pytest

from artifact.core.config import get_model, get_preset
from artifact.core.units import GIB
from artifact.estimate import memory
from tests.conftest import ROOT

SCRIPT = ROOT / "benchmarks" / "emulated_memory.py"
# bf16 refused through the capability seam: two configurations run (fp32), not four
ENV = {"ARTIFACT_PRECISION_SUPPORT": "bf16=no"}


def bench(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **ENV},
    )


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
        else:  # fp16 and tf32: this CPU; bf16: the seam
            assert state == "refused" and ("not supported" in reason or "TF32" in reason), cid
    assert got["gpt-tiny_fsdp_fp32_mb2_w2_e2"]["figures"] == ["fig4", "fig10", "fig11"]
    assert "no peak measured yet" in full.stdout


def test_the_time_bound_keeps_finished_rows_and_a_rerun_finishes(first_runs):
    _, stopped, partial, full = first_runs
    assert stopped.returncode == 0, stopped.stderr[-3000:]
    assert "stopped: --seconds 1 reached" in stopped.stdout
    # what finished before the first run to be measured (none can in 1 s) is kept as it was
    assert partial and all(r["status"] != "ran" for r in partial.values())
    done = rows(first_runs[0])
    assert all(done[cid] == row for cid, row in partial.items())
    assert full.stdout.count("kept from") == len(partial)


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
        (["--preset", "huge"], "'huge'; accepted: tiny, quick, paper, review"),
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
