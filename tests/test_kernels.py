"""Trace -> kernel table -> category sums and overlap, on hand-made and real traces."""

from pathlib import Path

import numpy as np
import pytest

from artifact.measure import kernels

DATA = Path(__file__).parent / "data"


def _kernel(name, ts, dur, stream=7, corr=None, cat="kernel"):
    return {
        "ph": "X",
        "cat": cat,
        "name": name,
        "ts": ts,
        "dur": dur,
        "pid": 0,
        "tid": stream,
        "args": {"stream": stream, "correlation": corr},
    }


def _launch(ts, corr):
    return {
        "ph": "X",
        "cat": "cuda_runtime",
        "name": "cudaLaunchKernel",
        "ts": ts,
        "dur": 1,
        "pid": 1,
        "tid": 1,
        "args": {"correlation": corr},
    }


def _iter(i, ts, dur):
    return {
        "ph": "X",
        "cat": "user_annotation",
        "name": f"artifact.iter#{i}",
        "ts": ts,
        "dur": dur,
        "pid": 1,
        "tid": 1,
    }


def gpu_trace():
    # iteration 0 launches at t=0..50: compute [100,110) and [120,130); nccl [105,125); memcpy
    # iteration 1 launches at t=200..250: compute [300,320), no communication
    return {
        "traceEvents": [
            _iter(0, 0, 50),
            _iter(1, 200, 50),
            _launch(1, 1),
            _launch(2, 2),
            _launch(3, 3),
            _launch(4, 4),
            _launch(201, 5),
            _kernel("ampere_sgemm_128x64", 100, 10, corr=1),
            _kernel("ampere_sgemm_128x64", 120, 10, corr=2),
            _kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 105, 20, stream=9, corr=3),
            _kernel("Memcpy DtoD (Device -> Device)", 140, 5, stream=11, corr=4, cat="gpu_memcpy"),
            _kernel("void at::native::vectorized_elementwise_kernel", 300, 20, corr=5),
        ]
    }


def test_classification():
    assert (
        kernels.classify_gpu("ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL", "kernel")
        == "communication"
    )
    assert (
        kernels.classify_gpu("ncclKernel_AllGather_RING_LL_Sum_int8_t", "kernel") == "communication"
    )
    assert kernels.classify_gpu("rcclGenericKernel", "kernel") == "communication"
    onerank = "__nv_static_32__b4148644_10_onerank_cu_fdf47990__ZN43_GLOBAL__N__oneRankReduceI13FuncPreMulSumIfEEEvPvS3_mmb"
    assert kernels.classify_gpu(onerank, "kernel") == "communication"
    assert kernels.classify_gpu("Memset (Device)", "gpu_memset") == "memory"
    assert kernels.classify_gpu("Memcpy DtoD (Device -> Device)", "gpu_memcpy") == "memory"
    assert kernels.classify_gpu("sm90_xmma_gemm_bf16bf16_bf16f32", "kernel") == "compute"


def test_gpu_table_iterations_and_overlap_by_hand():
    df = kernels.kernel_table(gpu_trace())
    assert list(df["category"]) == ["compute", "communication", "compute", "memory", "compute"]
    assert list(df["iteration"]) == [0, 0, 0, 0, 1]  # by the launching host call, not kernel time
    # communication [105,125) overlaps compute [105,110) and [120,125): 10 of 20 us
    assert kernels.overlap_fraction(df[df["iteration"] == 0]) == pytest.approx(0.5)
    per = kernels.per_iteration(df, 3)
    assert per["compute_us"].tolist() == [20.0, 20.0, 0.0]
    assert per["communication_us"].tolist() == [20.0, 0.0, 0.0]
    assert per["memory_us"].tolist() == [5.0, 0.0, 0.0]
    assert per["overlap_fraction"].iloc[0] == pytest.approx(0.5)
    assert np.isnan(per["overlap_fraction"].iloc[1]) and np.isnan(per["overlap_fraction"].iloc[2])


def test_cpu_trace_uses_leaf_gemms_and_gloo_ranges():
    trace = {
        "traceEvents": [
            _iter(0, 0, 100),
            {"ph": "X", "cat": "cpu_op", "name": "aten::matmul", "ts": 10, "dur": 40, "tid": 1},
            {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 11, "dur": 38, "tid": 1},
            {"ph": "X", "cat": "cpu_op", "name": "c10d::allreduce_", "ts": 5, "dur": 2, "tid": 1},
            {
                "ph": "X",
                "cat": "user_annotation",
                "name": "gloo:all_reduce",
                "ts": 6,
                "dur": 50,
                "tid": 2,
            },
        ]
    }
    df = kernels.kernel_table(trace)
    assert sorted(df["name"]) == [
        "aten::mm",
        "gloo:all_reduce",
    ]  # matmul wraps mm: not counted twice
    # gloo [6,56) vs mm [11,49): 38 of 50 us overlapped
    assert kernels.overlap_fraction(df) == pytest.approx(38 / 50)


def test_interval_helpers():
    merged = kernels.merge_intervals(np.array([0, 5, 20, 21]), np.array([10, 8, 30, 25]))
    assert merged.tolist() == [[0, 10], [20, 30]]
    other = kernels.merge_intervals(np.array([5, 25]), np.array([22, 40]))
    assert kernels.intersection_length(merged, other) == pytest.approx(5 + 2 + 5)
    assert kernels.merge_intervals(np.array([]), np.array([])).shape == (0, 2)


def test_against_hta_on_a_real_h200_trace():
    """Our sums and overlap vs HolisticTraceAnalysis 0.5.0 on a trace captured on an H200.

    The trace is fig8's overlap phase of the copy proxy (bf16 8192^3 matmuls beside 1 GiB
    device copies; one GPU, so no NCCL kernel): HTA names the copies MEMORY and reports the
    time COMPUTATION ran overlapping MEMORY, which is our overlap with the copy in the
    communication role.
    """
    from hta.trace_analysis import TraceAnalysis  # pinned in the test extra: no skip

    trace_dir = DATA / "h200_fig8_proxy_copy_overlap"
    analysis = TraceAnalysis(trace_dir=str(trace_dir))
    breakdown, _ = analysis.get_gpu_kernel_breakdown(visualize=False)
    t = dict(zip(breakdown["kernel_type"], breakdown["sum"], strict=True))
    hta_compute = t["COMPUTATION"] + t["COMPUTATION overlapping MEMORY"]
    hta_memory = t["MEMORY"] + t["COMPUTATION overlapping MEMORY"]
    hta_overlap = t["COMPUTATION overlapping MEMORY"] / hta_memory

    df = kernels.kernel_table(kernels.load_trace(trace_dir / "rank0.json.gz"))
    ours = df.groupby("category")["dur"].sum()
    assert ours["compute"] == pytest.approx(hta_compute, rel=0.01)
    assert ours["memory"] == pytest.approx(hta_memory, rel=0.01)
    ours_overlap = kernels.overlap_fraction(df, comm=("memory",))
    assert ours_overlap == pytest.approx(hta_overlap, rel=0.01)
    assert 0.3 < ours_overlap < 0.7  # the copies really ran beside the matmuls


def test_nccl_one_rank_kernel_counts_as_communication_on_a_real_h200_trace():
    """fig8's one-GPU NCCL proxy: an AVG all-reduce runs NCCL's oneRankReduce kernel.

    HTA 0.5.0 (regex ^nccl.*Kernel) would call that kernel computation; we call it
    communication, since it is NCCL's collective kernel and runs on NCCL's stream.
    """
    trace_dir = DATA / "h200_fig8_nccl_onerank_overlap"
    df = kernels.kernel_table(kernels.load_trace(trace_dir / "rank0.json.gz"))
    comm = df[df["category"] == "communication"]
    assert len(comm) > 0 and comm["name"].str.contains("oneRankReduce").all()
    assert comm["stream"].nunique() == 1
    assert not set(comm["stream"]) & set(df.loc[df["category"] == "compute", "stream"])
    per = kernels.per_iteration(df, 5)
    assert (per["communication_us"] > 0).all() and (per["compute_us"] > 0).all()
    assert 0.3 < kernels.overlap_fraction(df) < 0.9


def test_injected_delay_is_its_own_category_and_never_compute():
    spin = "at::cuda::(anonymous namespace)::spin_kernel(long)"  # torch.cuda._sleep on an H200
    assert kernels.classify_gpu(spin, "kernel") == "delay"
    trace = gpu_trace()
    trace["traceEvents"] += [_launch(3, 9), _kernel(spin, 126, 30, stream=9, corr=9)]
    per = kernels.per_iteration(kernels.kernel_table(trace), 2)
    assert per["delay_us"].tolist() == [30.0, 0.0]
    assert per["compute_us"].tolist() == [20.0, 20.0]  # unchanged by the delay
    # CPU: the sleep in the communication thread is marked by a host range
    cpu = {
        "traceEvents": [
            _iter(0, 0, 100),
            {
                "ph": "X",
                "cat": "user_annotation",
                "name": kernels.DELAY_MARK,
                "ts": 40,
                "dur": 25,
                "tid": 3,
            },
        ]
    }
    assert kernels.per_iteration(kernels.kernel_table(cpu), 1)["delay_us"].tolist() == [25.0]
