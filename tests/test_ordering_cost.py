"""benchmarks/ordering_cost.py: what sequential mode's stream ordering costs a collective
with nothing moved (the replay of ZeRO-3's issue pattern through the modes' wrappers)."""

import json
import math
import subprocess

import pytest

from tests.conftest import run_benchmark


def bench(*args: str) -> subprocess.CompletedProcess:
    return run_benchmark("ordering_cost", *args)


@pytest.mark.parametrize(
    "args, named",
    [(["--world", "1"], "'1'"), (["--device", "tpu"], "'tpu'"), (["--world", "x"], "'x'")],
)
def test_bad_input_is_one_line_and_exit_2(args, named):
    r = bench("--device", "cpu", *args)
    assert r.returncode == 2 and named in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and r.stdout == ""


@pytest.mark.slow  # over 1.5 s on 2 cores (a CLI process, or a long simulation)
def test_a_cpu_replay_times_both_modes_for_each_matmul_size():
    r = bench("--device", "cpu", "--steps", "2", "--collectives", "4", "--matmul", "16,32")
    assert r.returncode == 0, r.stderr[-2000:]
    out = json.loads(r.stdout)
    assert [row["matmul"] for row in out["rows"]] == [16, 32]
    for row in out["rows"]:
        for key in ("overlap_wall_ms", "sequential_wall_ms", "wall_us_a_collective"):
            assert math.isfinite(row[key]), key
        assert row["overlap_wall_ms"] > 0 and row["sequential_wall_ms"] > 0
    assert "one_stream_wait" not in out  # a GPU's only
