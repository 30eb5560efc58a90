"""Do K NCCL ranks, each its own process, run on one GPU, and how fast? (--ranks-per-gpu)

Run under torchrun with NCCL 2.30+ loaded and NCCL_MULTI_RANK_GPU_ENABLE=1: every rank
takes device LOCAL_RANK // K, then times each collective the rehearsal uses (all-reduce,
all-gather, reduce-scatter, a send/recv ring) at a few sizes, alone and beside a matmul.
Rank 0 prints one JSON line. Usage:
  torchrun --standalone --nproc-per-node 4 benchmarks/ranks_per_gpu_probe.py --per-gpu 4
"""

import argparse
import datetime
import json
import os
import time

import torch
import torch.distributed as dist


def timed(fn, iters: int) -> float:
    """Mean milliseconds of fn over iters, after one warm-up, every rank in step."""
    fn()
    torch.cuda.synchronize()
    dist.barrier()
    start = time.perf_counter()
    for _ in range(iters):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / iters * 1e3


def _size(mib, rank, world, device, a_mm, side, iters):
    """Each collective at `mib` MiB, alone and beside a matmul; and whether a sum is right."""
    n = mib * (1 << 20) // 2
    buf = torch.ones(n, device=device, dtype=torch.bfloat16)
    full = torch.empty(n * world, device=device, dtype=torch.bfloat16)
    shard = torch.empty(n // world, device=device, dtype=torch.bfloat16)
    recv = torch.empty_like(buf)

    def ring():
        ops = [
            dist.P2POp(dist.isend, buf, (rank + 1) % world),
            dist.P2POp(dist.irecv, recv, (rank - 1) % world),
        ]
        for w in dist.batch_isend_irecv(ops):
            w.wait()

    ops = {
        "all_reduce": lambda: dist.all_reduce(buf),
        "all_gather": lambda: dist.all_gather_into_tensor(full, buf),
        "reduce_scatter": lambda: dist.reduce_scatter_tensor(shard, buf),
        "send_recv": ring,
    }
    rows = []
    for name, fn in ops.items():

        def beside(fn=fn):
            with torch.cuda.stream(side):
                fn()
            for _ in range(4):
                a_mm @ a_mm
            torch.cuda.current_stream().wait_stream(side)

        rows.append(
            {
                "op": name,
                "mib": mib,
                "ms": round(timed(fn, iters), 3),
                "beside_matmul_ms": round(timed(beside, iters), 3),
            }  # fmt: skip
        )
    buf.fill_(1)
    dist.all_reduce(buf)
    torch.cuda.synchronize()
    return rows, bool((buf == world).all().item())


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--per-gpu", type=int, required=True)
    p.add_argument("--sizes-mib", default="1,16,64")
    p.add_argument("--iters", type=int, default=5)
    a = p.parse_args()
    local = int(os.environ["LOCAL_RANK"])
    device = torch.device("cuda", local // a.per_gpu)
    torch.cuda.set_device(device)
    t0 = time.perf_counter()
    dist.init_process_group("nccl", device_id=device, timeout=datetime.timedelta(seconds=60))
    rank, world = dist.get_rank(), dist.get_world_size()
    x = torch.ones(1, device=device)
    dist.all_reduce(x)
    torch.cuda.synchronize()
    out = {
        "world": world,
        "per_gpu": a.per_gpu,
        "init_s": round(time.perf_counter() - t0, 2),
        "first_all_reduce_ok": x.item() == world,
        "mps": bool(os.environ.get("CUDA_MPS_PIPE_DIRECTORY")),
        "rows": [],
    }
    a_mm = torch.randn(4096, 4096, device=device, dtype=torch.bfloat16)
    side = torch.cuda.Stream(device)
    for mib in (int(s) for s in a.sizes_mib.split(",")):
        rows, ok = _size(mib, rank, world, device, a_mm, side, a.iters)
        out["rows"] += rows
        out.setdefault("sums_ok", []).append(ok)
    out["matmul_alone_ms"] = round(timed(lambda: [a_mm @ a_mm for _ in range(4)], a.iters), 3)
    out["total_s"] = round(time.perf_counter() - t0, 2)
    if rank == 0:
        print(json.dumps(out), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
