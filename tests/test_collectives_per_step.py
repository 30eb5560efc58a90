"""benchmarks/collectives_per_step.py: the collectives one ZeRO-3 step routes through the
modes as rank 0 of W (what sequential mode's per-collective stream ordering multiplies)."""

import json
import subprocess

import pytest

from tests.conftest import run_benchmark


def bench(*args: str) -> subprocess.CompletedProcess:
    return run_benchmark("collectives_per_step", *args)


@pytest.mark.parametrize(
    "args, named",
    [(["--world", "1"], "'1'"), (["--precision", "fp8"], "'fp8'"), (["--model", "x"], "'x'")],
)
def test_bad_input_is_one_line_and_exit_2(args, named):
    r = bench(*args)
    assert r.returncode == 2 and named in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and r.stdout == ""


@pytest.mark.slow
def test_the_count_is_a_steps_gathers_and_scatters_whatever_the_tokens(tmp_path):
    """gpt-tiny at W = 4: every block's parameters gathered (forward and backward) and the
    gradients reduce-scattered, the same count at two sequence lengths."""
    counts = []
    for seq in ("16", "32"):
        out = tmp_path / f"{seq}.json"
        r = bench("--model", "gpt-tiny", "--world", "4", "--seq", seq, "--out", str(out))
        assert r.returncode == 0, r.stderr[-2000:]
        counts.append(json.loads(out.read_text()))
    assert counts[0]["by_name"] == counts[1]["by_name"]
    by_name = counts[0]["by_name"]
    assert by_name["all_gather_into_tensor"] > 2 * 2  # 2 blocks, forward and backward
    assert by_name["reduce_scatter_tensor"] >= 1
    assert counts[0]["collectives_per_step"] == sum(by_name.values())
