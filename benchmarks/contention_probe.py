"""GPU probe for the contention experiment and V2 (read-only: changes no clock or limit).

Answers, on one GPU, the questions the contention sweep's design depends on:
- the time of one compute unit per kind (GEMMs in four precisions, a memory-bound add),
  so every kind can be given about the same compute time per iteration;
- the name and clock rate of torch.cuda._sleep's kernel (V2's injected delay);
- whether NCCL's one-rank AVG kernel honours a communicator's CTA limit
  (ProcessGroupNCCL.Options().config.max_ctas), i.e. whether the SM-count ablation can
  run on one GPU.
Usage: torchrun --standalone --nproc-per-node 1 benchmarks/contention_probe.py
"""

from __future__ import annotations

import statistics

import torch
import torch.distributed as dist
from torch.profiler import ProfilerActivity, profile


def median_ms(fn, reps: int = 10) -> float:
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


def main() -> None:
    dist.init_process_group("nccl", device_id=torch.device("cuda", 0))
    dev = torch.device("cuda", 0)
    n = 8192
    for prec, dt in (
        ("bf16", torch.bfloat16),
        ("fp16", torch.float16),
        ("tf32", torch.float32),
        ("fp32", torch.float32),
    ):
        torch.backends.cuda.matmul.allow_tf32 = prec == "tf32"
        a, b = torch.randn(n, n, device=dev, dtype=dt), torch.randn(n, n, device=dev, dtype=dt)
        ms = median_ms(lambda a=a, b=b: torch.mm(a, b))
        print(f"gemm {prec} {n}: {ms:.3f} ms, {2 * n**3 / ms / 1e9:.0f} TFLOP/s")
    torch.backends.cuda.matmul.allow_tf32 = False
    x = torch.randn(1 << 28, device=dev, dtype=torch.bfloat16)
    y, z = torch.randn_like(x), torch.empty_like(x)
    ms = median_ms(lambda: torch.add(x, y, out=z))
    print(f"add bf16 256M: {ms:.3f} ms, {3 * x.numel() * 2 / ms / 1e6:.0f} GB/s")
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        torch.cuda._sleep(1_000_000)
        torch.cuda.synchronize()
    names = {e.name for e in prof.events() if e.device_type.name == "CUDA"}
    ms = median_ms(lambda: torch.cuda._sleep(1_000_000))
    print(f"_sleep kernel names: {names}; 1e6 cycles = {ms:.3f} ms")
    buf = torch.randn(1 << 28, device=dev)  # 1 GiB
    default = median_ms(lambda: dist.all_reduce(buf, op=dist.ReduceOp.AVG))
    for ctas in (1, 4, 16):
        opts = dist.ProcessGroupNCCL.Options()
        opts.config.min_ctas = ctas
        opts.config.max_ctas = ctas
        g = dist.new_group([0], backend="nccl", pg_options=opts)
        ms = median_ms(lambda g=g: dist.all_reduce(buf, op=dist.ReduceOp.AVG, group=g))
        print(f"onerank AVG 1 GiB: default {default:.3f} ms, max_ctas={ctas}: {ms:.3f} ms")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
