"""What `sequential` mode's ordering costs a collective, with nothing moved: host time and
wall time a collective, `sequential` less `overlap`, both on their zero-byte controls.

Session 15 (one H200, GPT-3 1.3B ZeRO-3 as rank 0 of 4): `sequential_control` ran 6.5 to
10.1 ms a step slower than `overlap_control` at every precision, for 224 collectives a step
(benchmarks/collectives_per_step.py): about 30 to 45 us each, unexplained (session 17's
run of this benchmark: 21.5 us of host time each, results/h200x1/session17). This replays
ZeRO-3's pattern through the artifact's own wrappers (artifact.rank.modes, under the fake
group at W, as `run --emulate-world W`): a collective issued from a side stream, waited
for there, the compute stream waiting for the side stream, then a matmul. `--matmul`
sets the compute between collectives: small, the step is host-bound (as ZeRO-3's was);
large, device-bound, so a wall-time gap that remains is the device's own. Modes
interleave a step at a time, in rotating order. On a GPU it also times the host calls
of one stream wait: `wait_stream` (a new event each) against one cached event.

    python benchmarks/ordering_cost.py                                  # one GPU
    python benchmarks/ordering_cost.py --device cpu --steps 3 --collectives 20
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

# this checkout's artifact package, not another one an editable install may point to
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from artifact.core.emulated import check_world  # noqa: E402
from artifact.core.errors import ArtifactError, bad_choice  # noqa: E402

DEVICES = ("cuda", "cpu")


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda", help=f"one of: {', '.join(DEVICES)}")
    p.add_argument("--world", default="4", help="W, the world size rank 0 stands in for")
    p.add_argument("--collectives", type=int, default=224, help="collectives a step")
    p.add_argument("--matmul", default="256,2048", help="matmul sizes between them, a row each")
    p.add_argument("--steps", type=int, default=30, help="timed steps a mode and size")
    p.add_argument("--numel", type=int, default=1 << 16, help="elements of a gathered shard")
    return p.parse_args(argv)


def _step(mode, device, n: int, a, shard, gathered, side) -> tuple[float, float]:
    """One step of `n` collectives; (host seconds to queue it, wall seconds to finish)."""
    import torch
    import torch.distributed as dist

    from artifact.measure.timing import synchronize
    from artifact.rank.modes import collectives_in

    synchronize(device)
    t0 = time.perf_counter()
    with collectives_in(mode, device, zero_bytes=True):
        for _ in range(n):
            if side is not None:  # ZeRO-3 gathers on a stream of its own
                side.wait_stream(torch.cuda.current_stream(device))
                with torch.cuda.stream(side):
                    work = dist.all_gather_into_tensor(gathered, shard, async_op=True)
                    work.wait()
                torch.cuda.current_stream(device).wait_stream(side)
            else:
                dist.all_gather_into_tensor(gathered, shard, async_op=True).wait()
            a = torch.tanh(a @ a)  # bounded, so repeated products stay finite
    queued = time.perf_counter() - t0
    synchronize(device)
    return queued, time.perf_counter() - t0


def _wait_calls(device, k: int = 20000) -> dict:
    """Host microseconds of one stream wait, two ways (no device work queued)."""
    import torch

    comm, compute = torch.cuda.Stream(device), torch.cuda.default_stream(device)
    cached = torch.cuda.Event()
    t0 = time.perf_counter()
    for _ in range(k):
        comm.wait_stream(compute)
    fresh = time.perf_counter() - t0
    t0 = time.perf_counter()
    for _ in range(k):
        cached.record(compute)
        comm.wait_event(cached)
    reused = time.perf_counter() - t0
    return {"wait_stream_us": 1e6 * fresh / k, "cached_event_us": 1e6 * reused / k}


def measure(args: argparse.Namespace, world: int) -> dict:
    import torch

    from artifact.measure.timing import gc_paused
    from artifact.rank import emulation
    from artifact.rank.modes import Mode, install_collective_modes

    if args.device == "cuda" and not torch.cuda.is_available():
        raise ArtifactError("--device cuda: no CUDA device is visible; use --device cpu")
    os.environ.update(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", LOCAL_WORLD_SIZE="1")
    device = torch.device(args.device)
    emulation.join(world, device)
    install_collective_modes()
    side = torch.cuda.Stream(device) if device.type == "cuda" else None
    shard = torch.randn(args.numel, device=device)
    gathered = torch.empty(world * args.numel, device=device)
    modes = (Mode.OVERLAP, Mode.SEQUENTIAL)
    rows = []
    for size in (int(s) for s in args.matmul.split(",")):
        a = torch.randn(size, size, device=device) / size**0.5
        times: dict = {m: [] for m in modes}
        with gc_paused():
            for m in modes:  # warm-up
                _step(m, device, args.collectives, a, shard, gathered, side)
            for i in range(args.steps):
                for m in modes[i % 2 :] + modes[: i % 2]:
                    times[m].append(_step(m, device, args.collectives, a, shard, gathered, side))
        per = {}
        for m in modes:
            per[m.value] = {
                "host_ms": 1e3 * statistics.median(t[0] for t in times[m]),
                "wall_ms": 1e3 * statistics.median(t[1] for t in times[m]),
            }
        ov, sq = per["overlap"], per["sequential"]
        rows.append({
            "matmul": size,
            **{f"{m}_{k}": round(v, 3) for m, d in per.items() for k, v in d.items()},
            "host_us_a_collective": round(1e3 * (sq["host_ms"] - ov["host_ms"]) / args.collectives, 2),
            "wall_us_a_collective": round(1e3 * (sq["wall_ms"] - ov["wall_ms"]) / args.collectives, 2),
        })  # fmt: skip
    out = {
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "torch": torch.__version__,
        "world": world,
        "collectives_a_step": args.collectives,
        "steps": args.steps,
        "rows": rows,
    }
    if device.type == "cuda":
        out["one_stream_wait"] = _wait_calls(device)
    return out


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    try:
        if args.device not in DEVICES:
            raise bad_choice("--device", args.device, DEVICES)
        world = check_world(args.world, "--world")
        print(json.dumps(measure(args, world), indent=1))
    except ArtifactError as e:
        print(f"ordering_cost: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
