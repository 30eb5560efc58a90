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


# Kernel names as torch 2.13 / NCCL 2.28 name them in a CUDA trace of FSDP2 (bf16 compute,
# FP32 sharded parameters)
_TL = "at::native::(anonymous namespace)::"
FSDP2_KERNELS = {
    "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)": "communication",
    "ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)": (
        "communication"
    ),
    # copy-in: the FP32 shards cast into the bf16 all-gather input (foreach copy, casting)
    f"void {_TL}multi_tensor_apply_kernel<{_TL}TensorListMetadata<2>, "
    f"{_TL}CopyFunctor<c10::BFloat16, float, 2, 1, 1>, {_TL}Copy<c10::BFloat16, float> >"
    f"({_TL}TensorListMetadata<2>, {_TL}CopyFunctor<c10::BFloat16, float, 2, 1, 1>, "
    f"{_TL}Copy<c10::BFloat16, float>)": "memory",
    # copy-in into the all-gather buffer (foreach copy, same dtype)
    f"void {_TL}multi_tensor_apply_kernel<{_TL}TensorListMetadata<2>, "
    f"{_TL}UnaryOpFunctor<c10::BFloat16, 2, 1, 1>, {_TL}Copy<float, float> >"
    f"({_TL}TensorListMetadata<2>, {_TL}UnaryOpFunctor<c10::BFloat16, 2, 1, 1>, "
    f"{_TL}Copy<float, float>)": "memory",
    # copy-out of the gathered buffer into the parameters
    "at::native::detail::split_with_sizes_copy_out_contiguous_no_cast_kernel(char **, char **, "
    "long *, long *, long *, long, long, long)": "memory",
    # gradients packed into the reduce-scatter input
    "void at::native::detail::chunk_cat_cuda_kernel<float, c10::BFloat16>(T2 **, T1 *, long *, "
    "long *, long *, long *, long *, long *, long, long)": "memory",
    # the same foreach machinery with another op stays compute (AdamW's sqrt and add)
    f"void {_TL}multi_tensor_apply_kernel<{_TL}TensorListMetadata<2>, "
    f"{_TL}UnaryOpFunctor<float, 2, 1, 1>, {_TL}Sqrt<float> >({_TL}TensorListMetadata<2>, "
    f"{_TL}UnaryOpFunctor<float, 2, 1, 1>, {_TL}Sqrt<float>)": "compute",
    f"void {_TL}multi_tensor_apply_kernel<{_TL}TensorListMetadata<2>, "
    f"{_TL}BinaryOpListAlphaFunctor<float, 2, 2, 0>, std::plus<float> >"
    f"({_TL}TensorListMetadata<2>, {_TL}BinaryOpListAlphaFunctor<float, 2, 2, 0>, "
    "std::plus<float>, double)": "compute",
    # the model's own copies and concatenations stay compute
    "void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda("
    "at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#7}::operator()() "
    "const::{lambda(c10::BFloat16)#1}, std::array<char*, 2ul>, 4, TrivialOffsetCalculator<1, "
    "unsigned int>, TrivialOffsetCalculator<1, unsigned int>, "
    "at::native::memory::LoadWithCast<1>, at::native::memory::StoreWithCast<1> >": "compute",
    f"void {_TL}CatArrayBatchedCopy<{_TL}OpaqueType<2u>, unsigned int, 4, 128, 1>("
    f"{_TL}OpaqueType<2u>*, {_TL}CatArrInputTensorMetadata<{_TL}OpaqueType<2u>, unsigned int, "
    "128, 1>, at::native::TensorSizeStride<unsigned int, 4u>, int, unsigned int)": "compute",
}


@pytest.mark.parametrize("name", FSDP2_KERNELS)
def test_fsdp2_kernels(name):
    assert kernels.classify_gpu(name, "kernel") == FSDP2_KERNELS[name]


def test_fsdp2_copies_are_memory_not_compute_in_a_trace():
    """One FSDP2 layer: copy-in, all-gather beside the previous layer's GEMM, copy-out."""
    names = list(FSDP2_KERNELS)
    cast_in, copy_out = names[2], names[4]
    trace = {
        "traceEvents": [
            _iter(0, 0, 50),
            *(_launch(t, c) for t, c in ((1, 1), (2, 2), (3, 3), (4, 4))),
            _kernel(cast_in, 100, 4, stream=20, corr=1),
            _kernel(names[0], 104, 30, stream=21, corr=2),
            _kernel("sm90_xmma_gemm_bf16bf16_bf16f32", 110, 40, stream=7, corr=3),
            _kernel(copy_out, 150, 6, stream=7, corr=4),
        ]
    }
    df = kernels.kernel_table(trace)
    assert list(df["category"]) == ["memory", "communication", "compute", "memory"]
    per = kernels.per_iteration(df, 1)
    assert per["compute_us"].tolist() == [40.0]  # the GEMM alone, not FSDP2's copies
    assert per["memory_us"].tolist() == [10.0]
    # all-gather [104,134) beside the GEMM [110,150): 24 of 30 us
    assert per["overlap_fraction"].iloc[0] == pytest.approx(24 / 30)


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
