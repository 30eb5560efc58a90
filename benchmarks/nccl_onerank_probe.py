"""Which one-rank NCCL collectives launch a kernel, and how long it runs (GPU, read-only).

Run: torchrun --standalone --nproc-per-node 1 benchmarks/nccl_onerank_probe.py
"""

import torch
import torch.distributed as dist
from torch.profiler import ProfilerActivity, profile

dist.init_process_group("nccl", device_id=torch.device("cuda", 0))
n = (1 << 30) // 4
x = torch.randn(n, device="cuda")
y = torch.empty_like(x)
ops = {
    "all_reduce_sum": lambda: dist.all_reduce(x),
    "all_reduce_avg": lambda: dist.all_reduce(x, op=dist.ReduceOp.AVG),
    "all_reduce_premul": lambda: dist.all_reduce(x, op=dist._make_nccl_premul_sum(1.0)),
    "all_gather_into_tensor": lambda: dist.all_gather_into_tensor(y, x),
    "reduce_scatter_tensor": lambda: dist.reduce_scatter_tensor(y, x),
    "broadcast": lambda: dist.broadcast(x, 0),
}
for name, fn in ops.items():
    try:
        fn()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(3):
                fn()
            torch.cuda.synchronize()
        gpu = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
        desc = sorted({(e.name, round(e.device_time, 1)) for e in gpu})
        print(f"{name}: {desc[:4]}")
    except Exception as e:
        print(f"{name}: failed: {type(e).__name__}: {e}")
dist.destroy_process_group()
