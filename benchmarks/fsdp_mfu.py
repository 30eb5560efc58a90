"""TFLOP/s and MFU of one FSDP configuration through DeepSpeed ZeRO-3 and through FSDP2.

Each implementation trains the model for a few steps in `overlap` mode (the trainers of
artifact.workloads, the same ones the figures use); a step is timed device-synchronised,
and MFU = 6 x parameters x tokens / step time / matmul peak, the peak measured once in
this process (artifact.measure.peak), as the figures compute it. Prints one JSON object,
alone on stdout (libraries' lines go to stderr), so `> mfu.json` saves it.

Run on one GPU (a one-process group, or under torchrun):
    python benchmarks/fsdp_mfu.py                     # gpt3-1.3b, seq 1024, mb 8, fp16
    python benchmarks/fsdp_mfu.py --device cpu --model gpt-tiny       # fp32, seq 32, mb 2
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import statistics
import sys
from pathlib import Path

import torch
import torch.distributed as dist

# this checkout's artifact package, not another one an editable install may point to
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from artifact.core.config import check_precision, get_model  # noqa: E402
from artifact.core.errors import ArtifactError  # noqa: E402
from artifact.core.options import FSDP_IMPLS  # noqa: E402
from artifact.experiments.fsdp import make_trainer  # noqa: E402
from artifact.experiments.training import release_memory  # noqa: E402
from artifact.measure.peak import peak_matmul_tflops  # noqa: E402
from artifact.measure.timing import timed  # noqa: E402
from artifact.rank import capability  # noqa: E402
from artifact.rank.modes import Mode  # noqa: E402
from artifact.rank.runner import profiler_activities  # noqa: E402
from artifact.workloads import fsdp_deepspeed  # noqa: E402
from artifact.workloads.fsdp_deepspeed import FsdpSpec  # noqa: E402
from artifact.workloads.models import Block  # noqa: E402

# deepspeed.zero.Init (the ZeRO-3 trainer on a GPU) replaces torch.nn.functional.linear
# process-wide with its own autograd function ("mem_efficient_linear", on by default; it
# says the change persists); restored after each implementation, so FSDP2 measured after
# DeepSpeed runs torch's own linear
_TORCH_LINEAR = torch.nn.functional.linear


def _init(device: torch.device) -> tuple[int, int]:
    """(rank, world size): torchrun's, or a one-process group of our own."""
    rank, world = int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
    local = int(os.environ.get("LOCAL_RANK", 0))
    # DeepSpeed asks for torchrun's variables; a plain `python` run is a group of one
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(local))
    os.environ.update(LOCAL_WORLD_SIZE=os.environ.get("LOCAL_WORLD_SIZE", "1"))
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29534")
    if device.type == "cuda":
        torch.cuda.set_device(local)
    backend = "nccl" if device.type == "cuda" else "gloo"
    # NCCL binds the group to one device and wants its index (torch.device("cuda") fails)
    device_id = torch.device("cuda", local) if device.type == "cuda" else None
    dist.init_process_group(backend, rank=rank, world_size=world, device_id=device_id)
    return rank, world


def measure(impl: str, spec: FsdpSpec, args, ctx, world: int, peak: float) -> dict:
    """Warm-up steps, then `iters` timed steps of one implementation, in overlap mode."""
    trainer = make_trainer(dataclasses.replace(spec, impl=impl), ctx)
    try:
        losses = [float(trainer.step(Mode.OVERLAP)) for _ in range(args.warmup)]
        times = []
        for _ in range(args.iters):
            times.append(
                timed(lambda: losses.append(float(trainer.step(Mode.OVERLAP))), ctx.device)
            )
        if args.trace:
            _profile(trainer, ctx.device, Path(args.trace) / impl)
        syncs = _sync_sites(trainer) if args.sync_sites else None
        leaves = _leaf_names(trainer) if impl == "deepspeed" else None
        step_s = statistics.median(times)
        tflops = trainer.model_flops_per_step(world) / step_s / world / 1e12
        return {
            "step_ms": step_s * 1e3,
            "step_ms_min": min(times) * 1e3,
            "tflops_per_gpu": tflops,
            "mfu": tflops / peak,
            "params": trainer.params,
            "loss_first_last": [losses[0], losses[-1]],
            **({"sync_sites": syncs} if syncs is not None else {}),
            **({"z3_leaves": leaves} if leaves is not None else {}),
            "peak_memory_gib": (
                torch.cuda.max_memory_allocated(ctx.device) / 2**30
                if ctx.device.type == "cuda"
                else None
            ),
        }
    finally:
        trainer.close()
        torch.nn.functional.linear = _TORCH_LINEAR
        release_memory(ctx.device)
        if ctx.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(ctx.device)


def _profile(trainer, device: torch.device, out: Path, steps: int = 3) -> None:
    """torch.profiler over `steps` more steps: where the host spends a step (a table by
    self CPU time) and the kernel timeline (a gzipped Chrome trace), to find the gaps."""
    from torch.profiler import profile

    out.mkdir(parents=True, exist_ok=True)
    with profile(activities=profiler_activities(device)) as prof:
        for _ in range(steps):
            timed(lambda: trainer.step(Mode.OVERLAP), device)
    table = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=40)
    (out / "cpu_ops.txt").write_text(table)
    prof.export_chrome_trace(str(out / "trace.json.gz"))


def block_granularity(model) -> int:
    """DeepSpeed's granularity of one transformer block (parameter_offload.py,
    _get_granularity_recursively): its parameters over its modules that hold parameters,
    itself included. As stage3_module_granularity_threshold, it makes the blocks ZeRO-3's
    leaves: DeepSpeed marks the outermost modules at or under it, and nothing above a block
    is (the model's granularity is larger, or unset past 1e9 parameters)."""
    with torch.device("meta"):
        block = Block(model)
    holders = [m for m in block.modules() if next(m.parameters(recurse=False), None) is not None]
    return sum(p.numel() for p in block.parameters()) // (len(holders) + 1)


def _leaf_names(trainer) -> dict[str, int]:
    """ZeRO-3's leaf modules by class, and whether its fast leaf sharding is on."""
    import collections

    from deepspeed.utils import get_z3_leaf_modules

    module = trainer.engine.module
    names = collections.Counter(type(m).__name__ for m in get_z3_leaf_modules(module))
    offload = trainer.engine.optimizer.parameter_offload
    return dict(names) | {"fast_sharding": int(offload.fast_sharding_for_leaf_module)}


def _sync_sites(trainer) -> dict[str, int]:
    """One step's explicit host-device synchronisations (event, stream and device), by the
    first frame outside torch that asked: a host that waits cannot queue work ahead, so its
    Python between kernels becomes GPU idle time."""
    import collections
    import traceback

    sites: collections.Counter = collections.Counter()
    wrapped = [(torch.cuda.Event, "synchronize"), (torch.cuda.Stream, "synchronize")]
    saved = [(owner, name, getattr(owner, name)) for owner, name in wrapped]
    saved_device = torch.cuda.synchronize

    def counting(fn, label):
        def call(*a, **k):
            for frame in reversed(traceback.extract_stack(limit=12)[:-1]):
                if "/torch/" not in frame.filename:
                    where = f"{Path(frame.filename).name}:{frame.lineno} {frame.name}"
                    sites[f"{label} {where}"] += 1
                    break
            return fn(*a, **k)

        return call

    for owner, name, fn in saved:
        setattr(owner, name, counting(fn, owner.__name__))
    torch.cuda.synchronize = counting(saved_device, "device")
    try:
        trainer.step(Mode.OVERLAP)
    finally:
        for owner, name, fn in saved:
            setattr(owner, name, fn)
        torch.cuda.synchronize = saved_device
    torch.cuda.synchronize()
    return dict(sites.most_common())


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    p.add_argument("--model", default="gpt3-1.3b")
    p.add_argument("--seq", type=int, help="sequence length (GPU default 1024; CPU: the model's)")
    p.add_argument("--micro-batch", type=int, help="per GPU (GPU default 8, CPU 2)")
    p.add_argument("--precision", help="GPU default fp16, CPU fp32")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--impls", default=",".join(FSDP_IMPLS), help="default: deepspeed,fsdp2")
    p.add_argument("--recompute", action="store_true", help="activation recomputation on")
    p.add_argument(
        "--zero",
        type=json.loads,
        default={},
        help="JSON merged into DeepSpeed's zero_optimization, to try a setting: "
        "'{\"memory_efficient_linear\": false}'",
    )
    p.add_argument(
        "--z3-leaf",
        choices=("block", "none", "threshold"),
        default="block",
        help="ZeRO-3 hooks each transformer block as one unit (the artifact's), every "
        "submodule, or the blocks as DeepSpeed's stage3_module_granularity_threshold picks "
        "them (which also turns on its fast sharding of leaf modules)",
    )
    p.add_argument(
        "--sync-sites",
        action="store_true",
        help="count one step's host-device synchronisations by the line that asked for them",
    )
    p.add_argument("--trace", help="folder: profile 3 more steps of each implementation there")
    args = p.parse_args(argv)
    impls = args.impls.split(",")
    if bad := [i for i in impls if i not in FSDP_IMPLS]:
        p.error(f"unknown FSDP implementation {bad[0]!r}; accepted: {', '.join(FSDP_IMPLS)}")
    gpu = args.device == "cuda"
    args.micro_batch = args.micro_batch or (8 if gpu else 2)
    args.precision = args.precision or ("fp16" if gpu else "fp32")
    if args.sync_sites and not gpu:
        p.error("--sync-sites counts CUDA synchronisations: it needs --device cuda")
    if min(args.seq or 1, args.micro_batch, args.warmup, args.iters) < 1:
        p.error("--seq, --micro-batch, --warmup and --iters must be at least 1")
    args.impls = impls
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("error: --device cuda but no GPU here; use --device cpu", file=sys.stderr)
        return 2
    try:
        model = get_model(args.model)
        check_precision(args.precision)
    except ArtifactError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if unsupported := capability.precision_unsupported(device, args.precision):
        print(f"error: {unsupported}", file=sys.stderr)
        return 2
    seq = args.seq or (1024 if device.type == "cuda" else model.seq_len)
    model = dataclasses.replace(model, seq_len=seq)
    with json_stdout() as out:
        return _run(args, device, model, seq, out)


@contextlib.contextmanager
def json_stdout():
    """A file on this process's stdout for the JSON alone; meanwhile file descriptor 1 is
    stderr's, so what libraries print there from C++ (torch 2.10's gloo: "[Gloo] Rank 0 is
    connected to 0 peer ranks ...") or Python goes to stderr."""
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        with os.fdopen(os.dup(saved), "w") as out:
            yield out
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def _run(args: argparse.Namespace, device: torch.device, model, seq: int, out) -> int:
    rank, world = _init(device)
    if device.type == "cuda":
        device = torch.device("cuda", torch.cuda.current_device())
    ctx = argparse.Namespace(device=device, rank=rank)  # what make_trainer reads
    spec = FsdpSpec(model, args.micro_batch, args.precision, recompute=args.recompute)
    if args.z3_leaf != "block":  # "none": DeepSpeed's default, hooks on every submodule
        fsdp_deepspeed.LEAF_MODULES = ()
    if args.z3_leaf == "threshold":
        args.zero = {"stage3_module_granularity_threshold": block_granularity(model)} | args.zero
    if args.zero:  # a trial setting, on top of the artifact's own (fsdp_deepspeed.py)
        ours = fsdp_deepspeed.deepspeed_config

        def trial(s):
            cfg = ours(s)
            cfg["zero_optimization"] |= args.zero
            return cfg

        fsdp_deepspeed.deepspeed_config = trial
    peak = peak_matmul_tflops(device, args.precision)
    results = {impl: measure(impl, spec, args, ctx, world, peak) for impl in args.impls}
    # the peak again with the GPU as warm as training left it: the calibration has come
    # out anywhere from 522 to 756 TFLOP/s (FP16) on one H200 from process to process
    peak_after = peak_matmul_tflops.__wrapped__(device, args.precision)  # not the cached one
    if rank == 0:
        config = {k: v for k, v in vars(args).items() if k != "impls"} | {"seq": seq}
        peaks = {"peak_tflops": peak, "peak_tflops_after": peak_after}
        print(json.dumps({**config, "world_size": world, **peaks, **results}, indent=1), file=out)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
