"""What the device cannot run, and what fails, is recorded and shown, never hidden.

- a precision the device lacks (forced through the capability check's seam) is recorded
  "not run" and the figure runs the others, exit 0;
- a figure stopped by SIGTERM leaves a status the report lists as failed;
- a config id shared by three figures does not garble the report's tables.
"""

import json
import signal
import subprocess
import sys
import time

import pandas as pd
import pytest

from artifact.analyze.aggregate import COLUMNS
from artifact.judge.compare import write_verdicts
from artifact.report import write_report
from artifact.store import RunStore
from tests.conftest import ROOT, processes_naming, run_cli


def _status(out, figure):
    return json.loads((out / "status" / f"{figure}.json").read_text())


@pytest.mark.slow
def test_fp16_unsupported_is_not_run_and_the_rest_runs(tmp_path):
    res = run_cli(
        *("run", "fig10", "--preset", "tiny", "--models", "gpt-tiny", "--reps", "1"),
        *("--out", str(tmp_path)),
        timeout=600,
        env={"ARTIFACT_PRECISION_SUPPORT": "fp16=no"},
    )
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-3000:]
    st = _status(tmp_path, "fig10")
    assert st["status"] == "ran"
    fp16 = st["configs"]["gpt-tiny_fsdp_fp16_mb2_w2"]
    assert fp16["status"] == "not run"
    assert fp16["reason"].startswith("FP16 is not supported on this CPU")
    ran = {p.name for p in (tmp_path / "records" / "fig10").iterdir()}
    assert "gpt-tiny_fsdp_fp32_mb2_w2" in ran and "gpt-tiny_fsdp_fp16_mb2_w2" not in ran
    # BF16 follows the CPU's own answer: it either ran or says why not
    assert ("gpt-tiny_fsdp_bf16_mb2_w2" in ran) != ("gpt-tiny_fsdp_bf16_mb2_w2" in st["configs"])
    assert "not run: FP16 is not supported" in res.stdout
    assert (tmp_path / "logs" / "fig10.log").stat().st_size > 0

    assert run_cli("compare", str(tmp_path)).returncode == 0
    assert run_cli("report", str(tmp_path)).returncode == 0
    md = (tmp_path / "report" / "appendix.md").read_text()
    assert "| fig10 | ran partly | 1 configuration(s) not run: FP16 is not supported" in md


@pytest.mark.slow
def test_sigterm_leaves_a_failed_status_the_report_shows(tmp_path):
    out = tmp_path / "run"
    proc = subprocess.Popen(
        [sys.executable, "-m", "artifact", "run", "fig8", "--preset", "tiny", "--reps", "3"]
        + ["--out", str(out)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 240
    while not list(out.glob("records/**/rep-*.json")) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert proc.poll() is None, "fig8 finished before it could be interrupted"
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 130
    st = _status(out, "fig8")
    assert st["status"] == "failed" and "interrupted by SIGTERM" in st["reason"]
    time.sleep(2)
    assert processes_naming(str(out)) == []  # torchrun and its workers went with it

    for command in ("summarize", "compare", "report"):  # as nox -s all goes on
        assert run_cli(command, str(out)).returncode == 0, command
    md = (out / "report" / "appendix.md").read_text()
    assert "| fig8 | failed | interrupted by SIGTERM" in md


def _row(figure, config_id, mode, metric, mean):
    return {
        "figure": figure,
        "gpu": "NVIDIA H200",
        "model": "gpt3-1.3b",
        "parallelism": "fsdp",
        "precision": "fp16",
        "mode": mode,
        "metric": metric,
        "mean": mean,
        "std": 0.01,
        "ci_low": mean * 0.99,
        "ci_high": mean * 1.01,
        "n": 5,
        "cv": 0.01,
        "noisy": False,
        "unit": "ms",
        "kind": "derived" if mode == "derived" else "measured",
        "config_id": config_id,
        "note": "",
    }


def test_report_of_a_config_id_shared_by_three_figures(tmp_path):
    """fig4, fig10 and fig11 all run the FSDP FP16 configuration: lookups by config id
    alone returned a pandas Series, printed into the V1 and V3 tables."""
    cid = "gpt3-1.3b_fsdp_fp16_mb8_w1"
    rows = []
    for k, fig in enumerate(("fig4", "fig10", "fig11")):
        rows += [
            _row(fig, cid, "nocomm", "compute_ms", 100.0 + k),
            _row(fig, cid, "sequential", "compute_ms", 101.0 + k),
            _row(fig, cid, "overlap", "compute_ms", 102.0 + k),
            _row(fig, cid, "overlap", "communication_ms", 0.0),
            _row(fig, cid, "overlap", "overlap_fraction", 0.0),
            _row(fig, cid, "nocomm", "tflops_per_gpu", 300.0 + k),
            _row(fig, cid, "sequential", "tflops_per_gpu", 299.0 + k),
            _row(fig, cid, "derived", "v1_baseline_gap", 0.01),
            _row(fig, cid, "derived", "slowdown", 0.01),
        ]
    pd.DataFrame(rows, columns=list(COLUMNS)).to_csv(tmp_path / "summary.csv", index=False)
    (tmp_path / "configs.json").write_text(json.dumps({cid: {"world_size": 1, "params": 1.3e9}}))
    for fig in ("fig4", "fig10", "fig11"):
        RunStore(tmp_path).write_status(fig, "ran", "every configuration ran")
    verdicts = write_verdicts(tmp_path)
    write_report(tmp_path)
    md = (tmp_path / "report" / "appendix.md").read_text()
    assert "dtype:" not in md and "Name:" not in md
    assert "| fig11 | gpt3-1.3b_fsdp_fp16_mb8_w1 | 1 % |" in md  # V3, one row per figure, in %
    first = md.split("\n\n")[1]  # the first paragraph under the title
    assert first.startswith("**Measured on 1 x NVIDIA H200: what one GPU can judge.**")
    # world size 1: every overlap item is not applicable, none judged from noise
    overlap_items = verdicts[verdicts["item"].isin(["fp16_relieves_small_models"])]
    assert set(overlap_items["verdict"]) == {"not applicable"}
    assert "Reproduction" not in first


def test_report_flags_a_profiled_pass_slower_than_the_timed_one(tmp_path):
    rows = [
        _row("fig4", "cfg_a", "overlap", "e2e_ms", 100.0),
        _row("fig4", "cfg_a", "overlap", "profiled_span_ms", 110.0),  # impossible in one state
        _row("fig4", "cfg_b", "overlap", "e2e_ms", 100.0),
        _row("fig4", "cfg_b", "overlap", "profiled_span_ms", 90.0),  # host gaps: normal
    ]
    pd.DataFrame(rows, columns=list(COLUMNS)).to_csv(tmp_path / "summary.csv", index=False)
    (tmp_path / "configs.json").write_text(json.dumps({}))
    write_verdicts(tmp_path)
    write_report(tmp_path)
    md = (tmp_path / "report" / "appendix.md").read_text()
    assert "2 mode(s) checked; 1 where the passes disagree: Eq. 4 is unreliable there." in md
    assert "| fig4 | cfg_a | overlap | 100 | 110 | 1.1 |" in md and "| cfg_b |" not in md
