"""What DeepSpeed ZeRO-3 holds on rank 0 of W, read on the CPU from the allocator's own
events (issue 31: the states term of artifact.estimate.memory).

Rank 0 of W runs alone under the fake process group (artifact.rank.emulation), the run's own
FsdpTrainer on a GPT of hidden 1024 and sequence 64 (activations negligible), three steps
under torch.profiler with profile_memory: every allocation and free, so the live bytes are
exact. Printed, per parameter: the states at rest between steps (less DeepSpeed's reduce
bucket), what the optimizer step adds (a parameter of the shard), and what the forward and
backward add at their peak (a parameter of the whole model: gathered parameters,
gradients in flight); then how many parameters ZeRO-3 still holds gathered as a backward
pass begins, beside artifact.estimate.memory.gathered_params.

    python benchmarks/zero3_memory.py --world 4 --layers 4 --precision bf16
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile, record_function

# this checkout's artifact package, not another one an editable install may point to
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from artifact.core.config import ModelConfig  # noqa: E402
from artifact.core.emulated import check_world  # noqa: E402
from artifact.core.errors import ArtifactError, bad_choice  # noqa: E402
from artifact.core.units import GIB  # noqa: E402
from artifact.estimate import memory  # noqa: E402

PRECISIONS = ("bf16", "fp32")  # what DeepSpeed's CPU accelerator takes


def spans(trace: dict, prefix: str) -> list[tuple[float, float]]:
    return sorted(
        (e["ts"], e["ts"] + e["dur"])
        for e in trace["traceEvents"]
        if e.get("ph") == "X" and e.get("name", "").startswith(prefix)
    )


def _args(argv: list[str] | None) -> argparse.Namespace:
    """The flags, checked: ArtifactError names a bad one."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--world", default="4", help="W, the world size rank 0 stands in for")
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--precision", default="bf16", help=f"one of {', '.join(PRECISIONS)}")
    args = p.parse_args(argv)
    args.world = check_world(args.world, "--world")
    if args.precision not in PRECISIONS:
        raise bad_choice("precision", args.precision, PRECISIONS)
    if args.layers < 1:
        raise ArtifactError(f"--layers must be at least 1, got {args.layers}")
    return args


def _probe(model: ModelConfig, world: int, precision: str) -> tuple[dict, int]:
    """Three ZeRO-3 steps of rank 0 of `world` under the memory profiler: its trace, and the
    parameters ZeRO-3 still holds gathered as one more backward begins."""
    from deepspeed.runtime.zero.partition_parameters import ZeroParamStatus

    from artifact.rank import emulation
    from artifact.rank.modes import collectives_for
    from artifact.workloads.fsdp_deepspeed import FsdpSpec, FsdpTrainer
    from artifact.workloads.models import lm_loss

    os.environ.update(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", LOCAL_WORLD_SIZE="1")
    cpu = torch.device("cpu")
    emulation.join(world, cpu)
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        trainer = FsdpTrainer(FsdpSpec(model, 1, precision), cpu, 0)
        step = trainer.engine.step

        def marked_step(*a, **k):
            with record_function("optimizer"):
                return step(*a, **k)

        trainer.engine.step = marked_step
        for i in range(3):
            with record_function(f"step{i}"):
                trainer.step("overlap")
    with collectives_for("overlap", cpu):
        loss = lm_loss(trainer.engine(trainer.tokens), trainer.tokens)
        held = sum(
            p.ds_numel
            for p in trainer.engine.module.parameters()
            if p.ds_status == ZeroParamStatus.AVAILABLE and not p.ds_persist
        )
        trainer.engine.backward(loss)
    with tempfile.TemporaryDirectory() as tmp:
        prof.export_chrome_trace(f"{tmp}/trace.json")
        return json.loads(Path(f"{tmp}/trace.json").read_text()), held


def _report(trace: dict, held: int, model: ModelConfig, world: int, precision: str) -> None:
    from artifact.workloads.precision import dtype_of

    live = sorted(
        (e["ts"], e["args"]["Total Allocated"])
        for e in trace["traceEvents"]
        if e.get("name") == "[memory]"
    )

    def at(t: float) -> int:  # the live bytes just before t
        return [b for ts, b in live if ts <= t][-1]

    def peak(a: float, b: float) -> int:
        return max(b_ for ts, b_ in live if a <= ts <= b)

    (s0, s1), (o0, o1) = spans(trace, "step2")[0], spans(trace, "optimizer")[-1]
    rest = at(s0)
    params = memory.total_params(model)
    shard = params / world
    bucket = memory.DEEPSPEED_REDUCE_BUCKET * dtype_of(precision).itemsize
    step_peak = max(peak(s0, o0), peak(o1, s1))
    print(f"rank 0 of {world}, {params / 1e6:.0f} M parameters, {precision}:")
    print(
        f"  states at rest: {(rest - bucket) / shard:.2f} bytes a parameter of the shard "
        f"(estimate: {memory.states_bytes(model, 1, precision) / params:.0f}) "
        f"+ the reduce bucket {bucket / GIB:.2f} GiB"
    )
    print(
        f"  optimizer step: +{(peak(o0, o1) - at(o0)) / shard:.2f} bytes a parameter of the shard"
    )
    print(
        f"  forward and backward: +{(step_peak - rest) / params:.2f} bytes a parameter of the model"
    )
    print(
        f"  gathered as the backward begins: {held / 1e6:.1f} M parameters "
        f"(estimate: {memory.gathered_params(model) / 1e6:.1f} M)"
    )


def main(argv: list[str] | None = None) -> int:
    try:
        args = _args(argv)
    except ArtifactError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    model = ModelConfig("probe", "gpt3", args.layers, 1024, 16, 4096, 4096, 64)
    trace, held = _probe(model, args.world, args.precision)
    _report(trace, held, model, args.world, args.precision)
    sys.stdout.flush()
    os._exit(0)  # as the run's worker leaves: DeepSpeed has aborted at exit


if __name__ == "__main__":
    sys.exit(main())
