"""README's table of the three paths quotes the plan: each cell's time is what
`plan --preset P --gpus G --gpu-memory-gib 80 --summary` totals today (a change that moves
the plan moves the table, or this fails)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _cells() -> dict[str, tuple[str, str]]:
    """{preset: (1-GPU cell, 4-GPU cell)} of README's table."""
    out = {}
    for line in (ROOT / "README.md").read_text().splitlines():
        m = re.match(r"\| (quick|review|paper) \(.*?\) \| `[^`]*` \| ([^|]*) \| ([^|]*) \|", line)
        if m:
            out[m.group(1)] = (m.group(2).strip(), m.group(3).strip())
    return out


def _total(cli, *args: str) -> str:
    res = cli("plan", *args, "--gpu-memory-gib", "80", "--summary")
    assert res.returncode == 0, res.stderr
    return re.search(r"^total: .*?; ([\d.]+ (?:min|h)) \(", res.stdout, re.M).group(1)


def test_the_table_has_every_path():
    assert set(_cells()) == {"quick", "review", "paper"}


@pytest.mark.parametrize("preset", ["quick", "review", "paper"])
def test_each_cell_quotes_the_plan(cli, preset):
    one, four = _cells()[preset]
    assert one.split(" (")[0] == _total(cli, "--preset", preset, "--gpus", "1")
    assert four.split(" (")[0] == _total(cli, "--preset", preset, "--gpus", "4")
    if preset == "paper":  # and the stopping rule's total beside it
        adaptive = _total(cli, "--preset", preset, "--gpus", "4", "--adaptive")
        assert f"({adaptive} with `--adaptive`" in four
