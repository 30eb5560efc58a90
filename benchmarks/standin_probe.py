"""The NCCL-shaped stand-in on a GPU (artifact.workloads.nccl_shaped): correctness of each
collective's plan against torch, the kernel's own byte and CTA counters against the ring's
formula, how closely its pacing meets the link's time, its unpaced HBM rate at a few CTA
counts, and (where NCCL >= 2.30 is loaded) what co-located NCCL ranks choose.
Prints one JSON object. Read-only on the GPU.

Usage: python benchmarks/standin_probe.py [--mib 1024] [--world 4] [--ctas 16] [--colocate]
"""

from __future__ import annotations

import argparse
import json

import torch

from artifact.core.emulated import LINK_GBS
from artifact.workloads import nccl_shaped as ns


def _time_ms(fn, reps: int = 5) -> float:
    fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    best = float("inf")
    for _ in range(reps):
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        best = min(best, start.elapsed_time(end))
    return best


def correctness(w: int, ctas: int) -> dict:
    dev, c, out = torch.device("cuda"), 1 << 20, {}
    for kind in ("all_gather", "reduce_scatter", "all_reduce", "broadcast"):
        for dtype in (torch.float16, torch.bfloat16, torch.float32):
            n_in = c if kind == "all_gather" else w * c
            inp = torch.randn(n_in, device=dev, dtype=dtype)
            orig = inp.clone()
            bufs = {"in": inp}
            if kind == "all_gather":
                bufs["out"] = torch.empty(w * c, device=dev, dtype=dtype)
            elif kind == "reduce_scatter":
                bufs["out"] = torch.empty(c, device=dev, dtype=dtype)
            elif kind == "all_reduce":
                bufs = {"out": inp}
            chunk = w * c if kind == "broadcast" else c
            bufs["fifo"] = torch.empty(chunk, device=dev, dtype=dtype)
            steps = ns.plan(kind, w)
            counters = ns.launch(bufs, steps, chunk, ctas)
            torch.cuda.synchronize()
            r, wr, seen = counters.read()
            ok = (r, wr) == ns.bytes_of(steps, chunk * inp.element_size()) and seen == ctas
            # the kernel rounds the running sum to the dtype after each step, torch at the end
            tol = {torch.float16: 1e-2, torch.bfloat16: 5e-2}.get(dtype, 1e-4)
            if kind == "reduce_scatter":
                ok &= torch.allclose(
                    bufs["out"].float(), orig.view(w, -1).float().sum(0), rtol=tol, atol=tol
                )
            if kind == "all_reduce":
                ok &= torch.allclose(
                    inp.view(w, -1).float(),
                    orig.view(w, -1).float().sum(0).expand(w, -1),
                    rtol=tol,
                    atol=tol,
                )
            if kind == "all_gather":
                ok &= torch.equal(bufs["out"].view(w, -1), orig.expand(w, -1))
            out[f"{kind}/{str(dtype)[6:]}"] = bool(ok)
    return out


def pacing(mib: int, w: int, ctas: int, gbs: float) -> dict:
    buf = torch.randn((mib << 20) // 2, device="cuda", dtype=torch.bfloat16)
    chunk = buf.numel() // w
    bufs = {"out": buf, "fifo": torch.empty(chunk, device="cuda", dtype=buf.dtype)}
    steps = ns.plan("all_reduce", w)
    ring = 2 * (w - 1) * chunk * buf.element_size()
    target_ms = ring / (gbs * 1e9) * 1e3
    row = {"ring_bytes": ring, "link_gbps": gbs, "target_ms": target_ms}
    row["paced_ms"] = _time_ms(lambda: ns.launch(bufs, steps, chunk, ctas, int(target_ms * 1e6)))
    row["spin_ms"] = _time_ms(
        lambda: ns.launch(bufs, steps, chunk, ctas, int(target_ms * 1e6), move_bytes=False)
    )
    reads, writes = ns.bytes_of(steps, chunk * buf.element_size())
    for c in sorted({4, 8, 16, 32, ctas, 132}):
        ms = _time_ms(lambda c=c: ns.launch(bufs, steps, chunk, c))
        row[f"unpaced_{c}cta_ms"] = ms
        row[f"unpaced_{c}cta_hbm_GBps"] = (reads + writes) / (ms * 1e-3) / 1e9
    # the inner block's size, and whether the pacing code alone (a deadline never waited
    # for) slows the copies
    for block, stages in (
        (4096, 1),
        (16384, 1),
        (32768, 1),
        (16384, 2),
        (8192, 2),
        (8192, 3),
        (4096, 3),
        (4096, 4),
        (4096, 6),
        (2048, 8),
    ):
        try:
            ms = _time_ms(
                lambda b=block, s=stages: ns.launch(bufs, steps, chunk, ctas, block=b, stages=s)
            )
        except Exception as e:  # a configuration Triton cannot compile (shared memory): its reason
            row[f"block_{block}_stages_{stages}_{ctas}cta"] = f"{type(e).__name__}: {e}"[:200]
            continue
        row[f"block_{block}_stages_{stages}_{ctas}cta_hbm_GBps"] = (
            (reads + writes) / (ms * 1e-3) / 1e9
        )
    ms = _time_ms(lambda: ns.launch(bufs, steps, chunk, ctas, 1))
    row[f"pace_code_only_{ctas}cta_hbm_GBps"] = (reads + writes) / (ms * 1e-3) / 1e9
    return row


def colocated(w: int, ctas: int, mib: int) -> dict:
    from artifact.rank import colocate

    out = {"nccl_version": ".".join(map(str, colocate.nccl_version()))}
    why = colocate.refusal()
    if why:
        return out | {"refused": why}
    return out | colocate.probe(w, ctas, mib << 20)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mib", type=int, default=1024)
    ap.add_argument("--world", type=int, default=4)
    ap.add_argument("--ctas", type=int, default=16)
    ap.add_argument("--colocate", action="store_true")
    a = ap.parse_args()
    name = torch.cuda.get_device_name()
    gbs = next((v for k, v in LINK_GBS.items() if k in name), 450.0)
    result = {
        "gpu": name,
        "correct": correctness(a.world, a.ctas),
        "pacing": pacing(a.mib, a.world, a.ctas, gbs),
    }
    if a.colocate:
        result["colocated"] = {w: colocated(w, a.ctas, a.mib) for w in (2, 4)}
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
