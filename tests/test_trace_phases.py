"""benchmarks/trace_phases.py: a step's forward, backward and optimizer time from a trace."""

import importlib.util
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parent.parent / "benchmarks" / "trace_phases.py"
_spec = importlib.util.spec_from_file_location("trace_phases", _PATH)
trace_phases = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(trace_phases)


def _kernel(name, ts, dur):
    return {"ph": "X", "cat": "kernel", "name": name, "ts": ts, "dur": dur}


def _step(name, ts, dur):
    return {"ph": "X", "cat": "gpu_user_annotation", "name": name, "ts": ts, "dur": dur}


def test_busy_time_is_the_union_of_overlapping_work():
    """Overlapping kernels (two streams) count once: 0-12 and 20-25 us busy, 17 in all."""
    events = [
        _kernel("gemm_fwd", 0, 10),
        _kernel("nccl_fwd", 5, 7),
        _kernel("gemm_fwd", 20, 5),
        _kernel("nccl_fwd", 21, 1),
        _kernel("gemm_bwd", 25, 5),
        _step("Optimizer.step#AdamW.step", 30, 1),
    ]
    (row,) = trace_phases.phases({"traceEvents": events})
    assert row["forward_busy_ms"] * 1e3 == pytest.approx(17)


def test_two_steps_and_a_two_part_optimizer_step():
    # step 1: forward 0-1000 us busy 800; backward 1000-3000 us busy 1500; optimizer in two
    # annotations (DeepSpeed's sub-groups) 3000-3400 and 3500-3900 with a copy between
    events = [
        _kernel("gemm_fwd", 0, 500),
        _kernel("gelu", 700, 300),
        _kernel("gemm_bwd", 1000, 1000),
        _kernel("flash_bwd", 2500, 500),
        _step("Optimizer.step#AdamW.step", 3000, 400),
        _kernel("adam", 3000, 400),
        _kernel("copy", 3400, 100),
        _step("Optimizer.step#AdamW.step", 3500, 400),
        _kernel("adam", 3500, 400),
        # step 2: forward 3900-4500 busy 600, backward 4500-5000 busy 250, one annotation
        _kernel("gemm_fwd", 3900, 600),
        _kernel("gemm_bwd", 4500, 250),
        _step("Optimizer.step#AdamW.step", 5000, 100),
        _kernel("adam", 5000, 100),
    ]
    rows = trace_phases.phases({"traceEvents": events})
    assert len(rows) == 2
    first, second = rows
    assert first["forward_span_ms"] == pytest.approx(1.0)
    assert first["forward_busy_ms"] == pytest.approx(0.8)
    assert first["backward_span_ms"] == pytest.approx(2.0)
    assert first["backward_busy_ms"] == pytest.approx(1.5)
    assert first["optimizer_span_ms"] == pytest.approx(0.9)
    assert first["optimizer_busy_ms"] == pytest.approx(0.9)
    assert second["forward_span_ms"] == pytest.approx(0.6)
    assert second["backward_busy_ms"] == pytest.approx(0.25)
    assert second["optimizer_span_ms"] == pytest.approx(0.1)


def test_a_trace_without_gpu_work_is_refused(tmp_path, capsys):
    path = tmp_path / "cpu.json"
    path.write_text(
        '{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 0, "dur": 5}]}'
    )
    assert trace_phases.main([str(path)]) == 2
    assert "no GPU kernels" in capsys.readouterr().err


def test_idle_after_a_sync_counts_only_syncs_that_drained_the_gpu():
    """A sync returning at 100 us with the GPU idle until 130: 30 us. One returning at
    150, inside a kernel (150-200), left work queued: nothing. One returning after the
    last kernel has no next work: nothing."""
    events = [
        _kernel("gemm_fwd", 0, 100),
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaStreamSynchronize", "ts": 40, "dur": 60},
        _kernel("gemm_fwd", 130, 70),
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaStreamSynchronize", "ts": 140, "dur": 10},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 101, "dur": 5},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaDeviceSynchronize", "ts": 210, "dur": 5},
    ]
    gaps = trace_phases.sync_gaps({"traceEvents": events})
    assert gaps == {"syncs": 3, "idle_after_us": 30}
