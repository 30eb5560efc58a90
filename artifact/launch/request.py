"""`run FIG`'s request: the flags' values as one typed, checked object (RunRequest),
built once by the CLI before anything is written (docs/design.md section 2, item 1):
the device and preset this machine can run, the ranks on this node, the GPUs' other
processes, the rendezvous that answers, a folder no other run holds."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from artifact import placement, procs
from artifact.core import emulated
from artifact.core.config import Preset, check_device, default_preset, get_preset
from artifact.core.errors import ArtifactError, check_positive
from artifact.core.options import FLAG_DESTS, RunOptions
from artifact.core.rankjob import RankJob
from artifact.env import device_kind
from artifact.figures import all_figures, spec_of
from artifact.launch import runplan
from artifact.launch.torchrun import DEFAULT_RDZV_TIMEOUT_S, check_rendezvous


@dataclass(frozen=True)
class RunRequest:
    """One `run FIG`, as the CLI built it from the flags, each value checked."""

    figure: str  # whose records the run writes (fig5's are fig4's)
    preset: Preset
    device: str  # cpu, cuda or rocm: this machine's
    nproc: int  # ranks on this node
    options: RunOptions
    out: Path | None  # None: results/<timestamp>-<preset>
    reps: int | None  # None: the plan's, or the figure's default for the preset
    nnodes: int = 1
    rank_env: dict[str, str] = field(default_factory=dict)  # the GPUs' other processes
    ranks_per_gpu: int = 1  # --ranks-per-gpu: ranks sharing each GPU (nproc = GPUs x this)
    rdzv_endpoint: str | None = None  # HOST:PORT of a multi-node run's rendezvous
    rdzv_timeout_s: float = DEFAULT_RDZV_TIMEOUT_S

    @property
    def shared(self) -> bool:
        """The agents of a multi-node run share one folder (one CLI a node): no lock."""
        return self.nnodes > 1

    def job(self, out: Path, reps: int) -> RankJob:
        """What the ranks are asked to do, once the folder `out` is claimed for `reps`."""
        return RankJob(self.figure, self.preset.name, self.device, out, reps, self.options)


def build(
    args: argparse.Namespace, figure: str, options: RunOptions, say: Callable[..., None]
) -> RunRequest:
    """The request from `run`'s flags (and its options, checked already), in the order
    the checks have always run: the rendezvous, a held folder, the device and preset, the
    ranks, the GPUs' other processes (said through `say`), the experiment's own check."""
    if args.rdzv_endpoint:  # bounded: an unreachable endpoint is one line, not minutes
        check_rendezvous(args.rdzv_endpoint, args.rdzv_timeout_s)
    nnodes = args.nnodes or 1
    if args.out:  # characters, lengths, inodes: one line before the folder is looked at
        from artifact.store import check_path

        check_path(Path(args.out))
    if nnodes == 1 and args.out and Path(args.out).is_dir():
        # one run a folder: refused before torch loads (taken once the run is known to
        # fit, artifact.launch.stage.claim); the agents of a multi-node run share theirs
        procs.FolderLock(Path(args.out)).check()
    device = resolve_device(args.device)
    preset = get_preset(args.preset or default_preset(device != "cpu"))
    check_preset_device(preset, device)
    experiment = spec_of(figure).module()
    nproc = processes(args, device, preset, emulated=options.emulate_world is not None)
    per_gpu = args.ranks_per_gpu or 1
    rank_env: dict[str, str] = {}  # what the ranks are told of the GPUs' other processes
    if device != "cpu":
        rank_env, others = procs.gpus_idle_env(nproc // per_gpu, args.allow_shared_device)
        if others:
            say(f"measuring beside other processes (--allow-shared-device): {others}")
        rank_env |= placement.rank_env(per_gpu)
    if hasattr(experiment, "check_options"):
        experiment.check_options(preset, options)
    out = Path(args.out) if args.out else None
    return RunRequest(
        figure, preset, device, nproc, options, out, args.reps, nnodes, rank_env, per_gpu,
        rdzv_endpoint=args.rdzv_endpoint, rdzv_timeout_s=args.rdzv_timeout_s,
    )  # fmt: skip


def check_preset_device(preset: Preset, device: str) -> None:
    """A GPU preset on a CPU is refused, but for the rehearsal (its CPU run is the gloo
    rehearsal of the same path)."""
    if device == "cpu" and preset.device != "cpu" and not preset.rehearsal:
        raise ArtifactError(f"preset {preset.name!r} needs a GPU; on CPU use --preset tiny")


def resolve_device(requested: str) -> str:
    """'auto' -> this machine's kind; a kind this machine lacks is an error."""
    check_device(requested)
    here = device_kind()
    if requested == "auto":
        return here
    if requested != "cpu" and requested != here:
        accepted = ", ".join(dict.fromkeys(["cpu", here]))
        raise ArtifactError(
            f"device {requested!r} is not available on this machine; accepted here: {accepted}"
        )
    return requested


def check_alone(args: argparse.Namespace, world: int) -> None:
    """--emulate-world is one process on one device: a real multi-rank launch is refused."""
    counts = {"--nproc": args.nproc, "--gpus": args.gpus, "--nnodes": args.nnodes}
    emulated.check_alone(world, counts)
    if args.rdzv_endpoint:
        raise ArtifactError(
            f"--emulate-world {world} with --rdzv-endpoint: emulation runs one process, "
            "with no rendezvous; accepted: --rdzv-endpoint left out"
        )


def processes(args: argparse.Namespace, device: str, preset, emulated: bool = False) -> int:
    """Ranks on this node: gloo processes on a CPU, one a GPU otherwise (K a GPU with
    --ranks-per-gpu K); one process under --emulate-world (rank 0 of W, alone)."""
    per_gpu = getattr(args, "ranks_per_gpu", None)
    placement.check(per_gpu, device, emulated)
    if emulated:
        if device != "cpu":
            import torch

            from artifact.core.emulated import link_gbs, ptx_refusal

            # an unknown GPU without --link-gbps is refused here, before the ranks start
            name = torch.cuda.get_device_name(0)
            link_gbs(name, args.link_gbps)
            if args.stand_in == "nccl-shaped" and (why := ptx_refusal(name)):
                raise ArtifactError(why)
        return 1
    if device == "cpu":
        if args.gpus:
            raise ArtifactError(
                f"--gpus {args.gpus} but this run is on the CPU (no GPU here); "
                "CPU runs take --nproc (gloo processes)"
            )
        nproc = args.nproc or preset.cpu_processes
        cores = os.cpu_count() or 1
        if nproc > cores and not preset.rehearsal:  # a rehearsal times nothing
            raise ArtifactError(
                f"--nproc {nproc} but this machine has {cores} CPU core(s); accepted: 1-{cores}"
            )
        return nproc
    import torch

    gpus = args.gpus or torch.cuda.device_count()
    if gpus > torch.cuda.device_count():
        raise ArtifactError(
            f"--gpus {gpus} but this machine has {torch.cuda.device_count()} GPU(s)"
        )
    if per_gpu and per_gpu > 1:
        placement.check_nccl(per_gpu)
    return gpus * (per_gpu or 1)


def options(args: argparse.Namespace, say: Callable[..., None]) -> RunOptions:
    """The experiment's knobs from the flags, every one checked before torch loads (a
    flag the figure does not take, under --only-applicable, is said through `say`)."""
    for name in (
        *("reps", "gpus", "nproc", "nnodes", "ranks_per_gpu"),
        *("hang_timeout_s", "rdzv_timeout_s"),
    ):
        check_positive(f"--{name.replace('_', '-')}", getattr(args, name))
    if args.nnodes and args.nnodes > 1 and not args.rdzv_endpoint:
        raise ArtifactError("--nnodes > 1 needs --rdzv-endpoint HOST:PORT")
    if args.rdzv_endpoint is not None:
        host, _, port = args.rdzv_endpoint.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ArtifactError(
                f"--rdzv-endpoint {args.rdzv_endpoint!r} is not HOST:PORT (e.g. node01:29500)"
            )
    options = RunOptions.from_flags(**{dest: getattr(args, dest) for dest in FLAG_DESTS})
    if options.emulate_world:
        check_alone(args, options.emulate_world)
    if args.only_applicable:  # nox -s all hands every figure the same flags
        for flag in runplan.foreign_options(args.figure, options):
            say(f"{args.figure} does not take {flag}: left out for it")
        options = options.only(spec_of(args.figure).options)
    runplan.check_options(args.figure, options)
    return options


def check_run_args(run_args: list[str]) -> None:
    """The flags `all` hands every figure, checked once before anything runs: a bad value
    is one line and exit 2, not one error per figure."""
    # checked for each figure as `all` hands them on: it keeps the flags it takes
    # (--only-applicable), so another figure's flag (--fsdp-impl, --emulate-world) is no
    # error; what is left must still hold together (--comm-ctas needs its --colocate or
    # --stand-in), and the "left out" notes wait for each figure's own run
    from artifact.arguments import build_parser

    parser = build_parser()
    for figure in all_figures():
        args = parser.parse_args(["run", figure, *run_args, "--only-applicable"])
        options(args, say=lambda *a, **k: None)
    device = resolve_device(args.device)
    preset = get_preset(args.preset or default_preset(device != "cpu"))
    check_preset_device(preset, device)
    placement.check(args.ranks_per_gpu, device, args.emulate_world)
    if args.out:  # one line here, not one per figure
        from artifact.store import check_not_a_file, check_path

        check_path(Path(args.out))
        check_not_a_file(Path(args.out))
