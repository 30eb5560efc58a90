"""How many collectives one ZeRO-3 training step routes through the modes, by kind, as
rank 0 of W under the fake process group (`run --emulate-world W`).

Sequential mode orders each of them between compute by stream waits on the default stream
(artifact.rank.modes.in_stream_order): a few host calls each. This count is what those
calls are multiplied by. (Session 15: at W = 4 the sequential penalty's zero-byte control
read +3.5 % [+1.2, +5.9] for GPT-3 1.3B FP16 on one H200, a host-bound step.) The count does
not depend on the tokens, so a CPU can take it: micro-batch 1 and a short sequence.

    python benchmarks/collectives_per_step.py --model gpt3-1.3b --world 4 --seq 128
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import os
import sys
import time
from pathlib import Path

# this checkout's artifact package, not another one an editable install may point to
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from artifact.core.config import MODELS, get_model  # noqa: E402
from artifact.core.emulated import check_world  # noqa: E402
from artifact.core.errors import ArtifactError, bad_choice  # noqa: E402
from artifact.store import atomic_write_text  # noqa: E402

PRECISIONS = ("fp32", "bf16", "fp16")


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="gpt3-1.3b", help=f"one of: {', '.join(MODELS)}")
    p.add_argument("--world", default="4", help="W, the world size rank 0 stands in for")
    p.add_argument("--seq", type=int, default=128, help="sequence length (the count ignores it)")
    p.add_argument("--precision", default="fp32", help=f"one of: {', '.join(PRECISIONS)}")
    p.add_argument("--out", type=Path, help="write the JSON here (DeepSpeed logs to stdout)")
    return p.parse_args(argv)


def count(model: str, world: int, seq: int, precision: str) -> dict:
    """The collectives of one overlap step after a warm-up step, by name."""
    import torch

    from artifact.rank import emulation
    from artifact.rank.modes import Mode
    from artifact.workloads.fsdp_deepspeed import FsdpSpec, FsdpTrainer

    os.environ.update(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", LOCAL_WORLD_SIZE="1")
    device = torch.device("cpu")
    emulation.join(world, device)
    calls: collections.Counter = collections.Counter()
    traffic = emulation.traffic

    def counted(name, *args, **kwargs):  # what modes._emulated calls once a collective
        calls[name] += 1
        return traffic(name, *args, **kwargs)

    emulation.traffic = counted
    spec = FsdpSpec(dataclasses.replace(get_model(model), seq_len=seq), 1, precision)
    trainer = FsdpTrainer(spec, device, 0)
    trainer.step(Mode.OVERLAP)  # the warm-up: its first gathers differ
    calls.clear()
    started = time.monotonic()
    trainer.step(Mode.OVERLAP)
    return {
        "model": model,
        "world": world,
        "precision": precision,
        "seq_len": seq,
        "micro_batch": 1,
        "collectives_per_step": sum(calls.values()),
        "by_name": dict(sorted(calls.items())),
        "step_s_on_this_cpu": round(time.monotonic() - started, 1),
    }


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    try:
        get_model(args.model)
        world = check_world(args.world, "--world")
        if args.precision not in PRECISIONS:
            raise bad_choice("precision", args.precision, PRECISIONS)
        if args.seq < 1:
            raise ArtifactError(f"--seq must be at least 1, got {args.seq}")
    except ArtifactError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    text = json.dumps(count(args.model, world, args.seq, args.precision), indent=1) + "\n"
    if args.out:
        atomic_write_text(args.out, text)
    print(text, end="")
    sys.stdout.flush()
    os._exit(0)  # without DeepSpeed's teardown, as the run's workers leave


if __name__ == "__main__":
    sys.exit(main())
