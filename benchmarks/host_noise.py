"""Where ZeRO-3's step-to-step noise comes from: the power sampler's thread, or the host.

Trains the quick preset's FSDP configuration (DeepSpeed ZeRO-3, gpt3-1.3b, FP16, the
figures' trainer) in `overlap` mode, timing each step device-synchronised as the
interleaved rounds do, with Python's collector paused. Blocks of `--block` steps alternate
with the power sampler off and on (artifact.measure.power.PowerSampler, the figures'
20 ms polling thread). Each step also records the main thread's CPU time and the
machine's stolen CPU time (/proc/stat; a VM's host running something else): a slow step
whose thread used no more CPU was waiting, not working. Prints one JSON object.

    python benchmarks/host_noise.py                 # one GPU
    python benchmarks/host_noise.py --device cpu --model gpt-tiny --block 4 --blocks 2
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from fsdp_mfu import _init  # noqa: E402

from artifact.core.config import get_model  # noqa: E402
from artifact.experiments.fsdp import make_trainer  # noqa: E402
from artifact.measure import power  # noqa: E402
from artifact.measure.timing import gc_paused, timed  # noqa: E402
from artifact.rank.modes import Mode  # noqa: E402
from artifact.workloads.fsdp_deepspeed import FsdpSpec  # noqa: E402


def steal_s() -> float:
    """Seconds of CPU stolen from this machine so far, all CPUs (0 where not reported)."""
    try:
        fields = Path("/proc/stat").read_text().splitlines()[0].split()
        return int(fields[8]) / 100.0 if len(fields) > 8 else 0.0
    except OSError:
        return 0.0


def summary(rows: list[dict]) -> dict:
    wall = np.array([r["wall_ms"] for r in rows])
    cpu = np.array([r["thread_cpu_ms"] for r in rows])
    return {
        "n": len(rows),
        "wall_ms_median": float(np.median(wall)),
        "wall_ms_p10": float(np.quantile(wall, 0.1)),
        "wall_ms_p90": float(np.quantile(wall, 0.9)),
        "robust_sd_pct": float(
            100 * 1.4826 * np.median(abs(wall - np.median(wall))) / np.median(wall)
        ),
        "slow_share": float(np.mean(wall > 1.05 * np.quantile(wall, 0.1))),
        "thread_cpu_ms_median": float(np.median(cpu)),
        # does a slow step spend more CPU (work) or the same (waiting)?
        "corr_wall_cpu": float(np.corrcoef(wall, cpu)[0, 1]) if len(rows) > 2 else None,
        "steal_ms_total": float(sum(r["steal_ms"] for r in rows)),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    p.add_argument("--model", default="gpt3-1.3b")
    p.add_argument("--precision", help="GPU default fp16, CPU fp32")
    p.add_argument("--block", type=int, default=20, help="steps a block")
    p.add_argument("--blocks", type=int, default=6, help="blocks, alternating off/on")
    p.add_argument("--warmup", type=int, default=5)
    args = p.parse_args(argv)
    if min(args.block, args.blocks, args.warmup) < 1:
        p.error("--block, --blocks and --warmup must be at least 1")
    device = torch.device(args.device)
    gpu = device.type == "cuda"
    model = get_model(args.model)
    if gpu:
        model = dataclasses.replace(model, seq_len=1024)
    rank, _ = _init(device)
    if gpu:
        device = torch.device("cuda", torch.cuda.current_device())
    ctx = argparse.Namespace(device=device, rank=rank)
    spec = FsdpSpec(model, 8 if gpu else 2, args.precision or ("fp16" if gpu else "fp32"))
    trainer = make_trainer(spec, ctx)
    backend = power.open_backend("auto")
    rows: list[dict] = []
    try:
        for _ in range(args.warmup):
            timed(lambda: trainer.step(Mode.OVERLAP), device)
        with gc_paused():
            for b in range(args.blocks):
                sampler_on = b % 2 == 1
                sampler = power.PowerSampler(backend) if sampler_on else None
                if sampler:
                    sampler.__enter__()
                for _ in range(args.block):
                    c0, s0 = time.thread_time(), steal_s()
                    wall = timed(lambda: trainer.step(Mode.OVERLAP), device)
                    rows.append(
                        {
                            "block": b,
                            "sampler": sampler_on,
                            "wall_ms": wall * 1e3,
                            "thread_cpu_ms": (time.thread_time() - c0) * 1e3,
                            "steal_ms": (steal_s() - s0) * 1e3,
                        }
                    )
                if sampler:
                    sampler.__exit__(None, None, None)
    finally:
        trainer.close()
        backend.close()
    if rank == 0:
        out = {
            "config": vars(args) | {"power_backend": backend.name},
            "sampler_off": summary([r for r in rows if not r["sampler"]]),
            "sampler_on": summary([r for r in rows if r["sampler"]]),
            "steps": rows,
        }
        print(json.dumps(out, indent=1))
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
