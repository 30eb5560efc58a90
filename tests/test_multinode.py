"""Multi-node launch: two torchrun agents on one machine over loopback, one gloo process each."""

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT, free_port


@pytest.mark.slow
def test_two_nodes_through_torchrun_rendezvous(tmp_path):
    out = tmp_path / "out"
    endpoint = f"127.0.0.1:{free_port()}"
    cmd = [
        sys.executable,
        "-m",
        "artifact",
        "run",
        "fig8",
        "--preset",
        "tiny",
        "--nproc",
        "1",
        "--nnodes",
        "2",
        "--rdzv-endpoint",
        endpoint,
        # both agents import torch before they join: on a busy 2-core machine that took
        # longer than the default minute's bound once
        "--rdzv-timeout-s",
        "240",
        "--reps",
        "1",
        "--out",
        str(out),
    ]
    agents = [
        subprocess.Popen(
            cmd,
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ, "COLUMNS": "120"},
        )
        for _ in range(2)
    ]
    logs = [a.communicate(timeout=300)[0] for a in agents]
    assert [a.returncode for a in agents] == [0, 0], "\n".join(log[-2000:] for log in logs)
    recs = sorted(out.glob("records/fig8/*/overlap/rep-000.json"))
    assert len(recs) == 1
    rec = json.loads(recs[0].read_text())
    assert rec["provenance"]["world_size"] == 2 and rec["provenance"]["nnodes"] == 2
    assert len(rec["per_rank"]) == 2
    assert (out / "summary.csv").is_file()


@pytest.mark.slow  # over 1.5 s on 2 cores (a CLI process, or a long simulation)
def test_nnodes_needs_an_endpoint(cli, tmp_path):
    res = cli("run", "fig8", "--nnodes", "2", "--out", str(tmp_path / "o"))
    assert res.returncode == 2
    assert res.stderr.strip() == "error: --nnodes > 1 needs --rdzv-endpoint HOST:PORT"
    assert not (tmp_path / "o").exists()
