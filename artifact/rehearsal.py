"""`python -m artifact rehearsal` (`nox -s rehearsal`): README's W-GPU path as a dress
rehearsal on the GPUs present, so a reviewer knows the 4-GPU run works before booking
the node.

W ranks (default 4) run every figure at preset rehearsal (tiny models, the fewest steps
that run every phase), with real NCCL (or RCCL) between them: K = W / GPUs ranks share
each GPU (`--ranks-per-gpu`, artifact.placement), or W gloo processes on a CPU. FSDP
runs through DeepSpeed ZeRO-3 and torch FSDP2, the pipeline through Megatron-core's 1F1B.
First, rank 0 of the same FSDP rows runs under `--emulate-world W` into OUT/reference/:
the byte counts the functional checks hold each real rank to
(artifact/judge/rehearsal.py). Then summary, verdicts and report, as `all` writes them:
no paper item is judged, and the first screen says why.
"""

from __future__ import annotations

import argparse
import contextlib
import os
from collections.abc import Callable
from pathlib import Path

from artifact import placement
from artifact.budget import flag_value
from artifact.core.errors import ArtifactError
from artifact.figures import own_records, spec_of
from artifact.judge.rehearsal import REFERENCE
from artifact.launch.request import resolve_device
from artifact.rank import mps

WORLD = 4  # the paper's: 4 GPUs of one node
PRESET = "rehearsal"
FSDP_IMPLS = "deepspeed,fsdp2"
# Without MPS, ranks sharing a GPU take turns on it; the measured cost decides the default
MPS_DEFAULT = "off"


def reference_figures() -> tuple[str, ...]:
    """The figures with FSDP rows, run under emulation as the reference: those that run
    training steps of their own (fig5 reads fig4's; fig10 and fig11 add precisions)."""
    return tuple(f for f in own_records() if spec_of(f).trains)


def parse(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    """The rehearsal's own flags; the rest go to every figure's `run`."""
    p = argparse.ArgumentParser(prog="artifact rehearsal", add_help=False)
    p.add_argument("--world", type=int, default=WORLD)
    p.add_argument("--ranks-per-gpu", type=int)
    p.add_argument("--mps", default=MPS_DEFAULT)
    own, rest = p.parse_known_args(argv)
    if own.world < 2:
        raise ArtifactError(f"--world {own.world}; accepted: an integer of 2 or more (ranks)")
    if own.mps not in mps.CHOICES:
        raise ArtifactError(f"--mps {own.mps!r}; accepted: {', '.join(mps.CHOICES)}")
    for flag in ("--gpus", "--nproc", "--preset", "--emulate-world", "--nnodes"):
        if flag in rest:
            raise ArtifactError(
                f"{flag} is the rehearsal's to choose (W = --world ranks on the GPUs present); "
                "accepted: --world, --ranks-per-gpu, --mps, --out and run's other flags"
            )
    return own, rest


def layout(own: argparse.Namespace, device: str, gpus_present: int) -> tuple[list[str], int]:
    """run's flags that place W ranks here, and K (ranks a GPU; 1 on a CPU)."""
    if device == "cpu":
        placement.check(own.ranks_per_gpu, device)
        return ["--device", "cpu", "--nproc", str(own.world)], 1
    k = own.ranks_per_gpu or next(
        k for k in range(1, own.world + 1) if own.world % k == 0 and own.world // k <= gpus_present
    )
    gpus = placement.layout(own.world, k, gpus_present)
    if k > 1:
        placement.check_nccl(k)  # before anything is written: one line
    return ["--gpus", str(gpus), "--ranks-per-gpu", str(k)], k


def _gpus_present(device: str) -> int:
    if device == "cpu":
        return 0
    import torch

    return torch.cuda.device_count()


def _without(args: list[str], flag: str) -> list[str]:
    """`args` less `flag` and its value."""
    if flag not in args:
        return args
    k = args.index(flag)
    return args[:k] + args[k + 2 :]


def checked_run_args(argv: list[str]) -> list[str]:
    """run's flags as the rehearsal hands them on, for the CLI to check before anything
    runs (the placement's own flags checked here, K's NCCL later: it needs torch)."""
    own, rest = parse(argv)
    device = resolve_device(flag_value(rest, "--device") or "auto")
    placement.check(own.ranks_per_gpu, device)
    return ["--preset", PRESET, *rest]


def run(argv: list[str], say: Callable[[str], None] = print) -> int:
    from artifact.store import default_out_dir
    from artifact.suite import child, run_all

    own, rest = parse(argv)
    device = resolve_device(flag_value(rest, "--device") or "auto")
    place, k = layout(own, device, _gpus_present(device))
    args = ["--preset", PRESET, *place, *_without(rest, "--device")]
    if "--fsdp-impl" not in args:
        args += ["--fsdp-impl", FSDP_IMPLS]
    if "--out" not in args:
        args += ["--out", str(default_out_dir(PRESET))]
    out = Path(flag_value(args, "--out"))
    shared = k > 1 and own.mps == "on"
    say(
        f"rehearsal: {own.world} ranks "
        + (
            f"on {own.world // k} GPU(s), {k} a GPU"
            if device != "cpu"
            else "as gloo processes on the CPU"
        )
        + (" under an MPS daemon of the run's own" if shared else "")
        + f"; no number it gives measures the paper's quantities; out {out}"
    )
    with mps.daemon(out) if shared else contextlib.nullcontext({}) as env:
        os.environ.update(env)
        # the reference first: what rank 0 of the same FSDP rows moves under emulation
        ref = ["--preset", PRESET, "--emulate-world", str(own.world), "--parallelisms", "fsdp"]
        ref += ["--fsdp-impl", flag_value(args, "--fsdp-impl"), "--reps", "1"]
        ref += ["--device", device, "--out", str(out / REFERENCE), "--only-applicable"]
        failed = []
        for fig in reference_figures():
            rc, _ = child(["run", fig, *ref])
            say(f"reference: {fig}'s FSDP rows as rank 0 of {own.world}, emulated: exit {rc}")
            failed += [fig] if rc else []
        return run_all(args, say=say) or (1 if failed else 0)
