"""One rank of an experiment, started by torchrun (artifact.launch.torchrun):
`python -m artifact.rank.worker --job JSON` (artifact.core.rankjob)."""

from __future__ import annotations

import argparse
import datetime
import logging
import os
import sys
import warnings

from artifact import procs

if __name__ == "__main__":
    # A rank dies with torchrun, its parent; asked for before torch's seconds of imports,
    # and at once if torchrun is already gone (killed with the CLI meanwhile)
    procs.die_with_parent(parent=procs.TORCHRUN)
    # and its children (DeepSpeed's op build: ninja, the compilers) die with the rank
    procs.reap_group_on_exit()

import torch
import torch.distributed as dist

from artifact import env as envmod
from artifact import placement
from artifact.core.config import get_preset
from artifact.core.errors import ArtifactError
from artifact.core.options import RunOptions
from artifact.core.rankjob import RankJob
from artifact.figures import spec_of
from artifact.measure import device as device_layer
from artifact.measure import power
from artifact.rank import adaptive, emulation, mps
from artifact.rank.context import RunContext, StopRequested
from artifact.store import RunStore


def _device(kind: str, local_rank: int) -> torch.device:
    """The rank's device: GPU local_rank // K with --ranks-per-gpu K (artifact.placement).
    DeepSpeed's ZeRO-3 builds its device from LOCAL_RANK itself (zero.Init, and the engine
    where no args.device_rank is given), so with K > 1 LOCAL_RANK is set to that GPU's index
    too; the rank's own place on the node stays in ARTIFACT_NODE_LOCAL_RANK."""
    if kind == "cpu":
        return torch.device("cpu")
    index = placement.device_index(local_rank, placement.per_gpu())
    if index != local_rank:
        os.environ["ARTIFACT_NODE_LOCAL_RANK"] = str(local_rank)
        os.environ["LOCAL_RANK"] = str(index)
    torch.cuda.set_device(index)
    return torch.device("cuda", index)


def failure_reason(e: BaseException, figure: str) -> str:
    """One plain line: what broke, and where the whole story is."""
    first = (str(e).strip().splitlines() or [""])[0][:300]
    what = "interrupted" if isinstance(e, KeyboardInterrupt) else f"{type(e).__name__}: {first}"
    return f"{what} (log: logs/{figure}.log)"


def _parse(argv: list[str] | None) -> RankJob:
    """The job the launcher wrote (artifact.launch.torchrun): `--job JSON`, parsed once."""
    p = argparse.ArgumentParser()
    p.add_argument("--job", required=True, help="the RankJob as JSON (artifact.core.rankjob)")
    return RankJob.from_json(p.parse_args(argv).job)


def _join(kind: str, options: RunOptions) -> tuple[int, int, int, torch.device, str]:
    """Join the process group: (rank, world size, local rank, device, backend). With
    --emulate-world W this lone process joins the fake group as rank 0 of W."""
    rank = int(os.environ.get("RANK", 0))
    world = int(os.environ.get("WORLD_SIZE", 1))
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    logging.basicConfig(
        level=logging.INFO if rank == 0 else logging.WARNING,
        format=f"[rank {rank}] %(levelname)s %(name)s: %(message)s",
    )
    device = _device(kind, local_rank)
    if emulate := options.emulate_world:
        if world != 1:  # the CLI refuses this; a hand-made torchrun command may not
            raise RuntimeError(f"--emulate-world {emulate} runs one process, not {world}")
        emulation.join(emulate, device, options.link_gbps, options.stand_in, options.comm_ctas)
        return 0, emulate, local_rank, device, "fake"
    backend = "gloo" if device.type == "cpu" else "nccl"  # RCCL answers to "nccl" on ROCm
    # collectives time out with the launcher's hang watchdog, not NCCL's 10 min default
    timeout = datetime.timedelta(seconds=float(os.environ.get("ARTIFACT_HANG_S", 600)))
    dist.init_process_group(
        backend, device_id=device if device.type == "cuda" else None, timeout=timeout
    )
    return rank, world, local_rank, device, backend


def _context(job: RankJob, local_rank: int, device, backend: str) -> RunContext:
    """The rank's RunContext: preset, telemetry, provenance and the results store."""
    rank, world = dist.get_rank(), dist.get_world_size()
    preset = get_preset(job.preset)
    gpu_index = device_layer.physical_index(device.index if device.type == "cuda" else local_rank)
    telemetry = (
        power.open_backend("auto", gpu_index) if device.type == "cuda" else power.NoneBackend()
    )
    provenance = {
        **envmod.capture(),
        "preset": preset.name,
        "figure": job.figure,
        "world_size": world,
        "backend": backend,
        "nnodes": int(os.environ.get("GROUP_WORLD_SIZE", 1)) if emulation.has_peers() else 1,
        "power_backend": telemetry.name,
        # which GPU, and its power limit and application clocks, as the run began (the
        # status holds them as it ended: gpu_state_end)
        "gpu_state": getattr(telemetry, "state", dict)(),
        # ranks sharing each GPU (--ranks-per-gpu), and whether an MPS daemon served them
        "ranks_per_gpu": placement.per_gpu(),
        "mps": mps.in_use(),
        # set by the CLI's --allow-shared-device when other jobs used the GPU
        "other_gpu_processes": os.environ.get(procs.SHARED_PROCESSES_ENV, ""),
    }
    options = job.options
    if options.emulate_world:
        provenance["emulated_world"] = options.emulate_world
        provenance["emulated_link_gbps"] = emulation.link_gbps()
        provenance["emulated_stand_in"], provenance["emulated_comm_ctas"] = emulation.stand_in()
    return RunContext(
        figure=job.figure,
        preset=preset,
        device=device,
        rank=rank,
        world_size=world,
        store=RunStore(job.out),
        provenance=provenance,
        reps=job.reps,
        warmup=preset.warmup,
        iters=preset.iters_per_rep,
        traces_dir=job.out / "traces" / job.figure,
        options=options,
        gpu_index=gpu_index,
        power_backend=telemetry,
        power_interval_s=options.power_interval_s or power.DEFAULT_INTERVAL_S,
    )


def _run(ctx: RunContext) -> dict:
    """The figure's experiment; a failure or a Ctrl-C leaves its status saying so.
    Returns the GPU's state as it ended (device.state: its power limit and clocks then)."""
    store, figure = ctx.store, ctx.figure
    try:
        spec_of(figure).run(ctx)
    except StopRequested:
        if ctx.is_writer:
            store.write_status(
                figure,
                "failed",
                f"interrupted by Ctrl-C between repetitions (log: logs/{figure}.log)",
                interrupted=True,
            )
        if emulation.has_peers():
            dist.barrier()
        logging.shutdown()
        os._exit(0)  # a clean stop; the status and the CLI say it was interrupted
    except BaseException as e:
        if ctx.is_writer:
            try:
                store.write_status(figure, "failed", failure_reason(e, figure))
            except (OSError, ArtifactError) as again:  # a full disk: the first error counts
                logging.getLogger(__name__).warning("status not written: %s", again)
        raise
    finally:
        ended = getattr(ctx.power_backend, "state", dict)()
        ctx.power_backend.close()
    return ended


def _finish_status(
    store: RunStore, figure: str, reps: int, processes: int, gpu_state_end: dict | None = None
) -> None:
    """Rank 0, after every rank is done: 'running' becomes 'ran' or 'not run'; a 'ran'
    gets the stamp that lets a resumed run skip starting the ranks (RunStore.finished).
    One read and one write of the status."""
    status = store.status()[figure]
    state, reason = status["status"], status["reason"]
    details = {k: v for k, v in status.items() if k not in ("figure", "status", "reason")}
    records = store.record_count(figure)
    if state == "running":  # else the experiment said it itself (fig6, fig7, fig9)
        skipped = details.get("configs", {})
        if records:
            state = "ran"
            reason = (
                f"{len(skipped)} configuration(s) not run" if skipped else "every configuration ran"
            )
        else:
            state, reason = "not run", "no configuration could run here"
    if state in ("ran", "not run"):  # a 'not run' of this machine's: no resume starts it again
        details["finished"] = {"reps": reps, "processes": processes, "records": records}
    if gpu_state_end:  # rank 0's GPU as the figure ended: its power limit and clocks then
        details["gpu_state_end"] = gpu_state_end
    if state == "ran":
        reason = _with_stopped(store, figure, details, reason)
    if state != status["status"] or state in ("ran", "not run"):
        store.write_status(figure, state, reason, **details)


def _with_stopped(store: RunStore, figure: str, details: dict, reason: str) -> str:
    """--adaptive: each configuration's decision in the status (`stopped`), and the
    reason says how many stopped before the maximum, so none is hidden."""
    decisions = {c: d for (_, c), d in store.stopping(figure).items()}
    if not decisions:
        return reason
    details["stopped"] = {c: adaptive.shown(d) for c, d in decisions.items()}
    early = sum(d["n"] < d["max"] for d in decisions.values())
    return (
        f"{reason}; {early} of {len(decisions)} stopped before the maximum "
        "by the stopping rule (--adaptive)"
    )


def colocates(job: RankJob) -> bool:
    """Whether this run's ranks co-locate NCCL ranks on one GPU: its figure always does
    (FigureSpec.colocates_nccl_ranks), or --colocate W asked for it."""
    return spec_of(job.figure).colocates_nccl_ranks or bool(job.options.colocate)


def colocate_env() -> dict[str, str]:
    from artifact.rank.colocate import NCCL_ENV

    return NCCL_ENV


def main(argv: list[str] | None = None) -> None:
    """One rank; an ArtifactError (a full disk, a bad input the CLI could not see) is
    one line, `error: ...`, and exit 2, not a traceback a rank."""
    try:
        _main(argv)
    except ArtifactError as e:
        print(f"error: {e}", file=sys.stderr, flush=True)
        logging.shutdown()
        os._exit(2)


def _main(argv: list[str] | None) -> None:
    job = _parse(argv)
    # DeepSpeed calls torch.distributed functions that torch 2.13 marks deprecated; the
    # warning repeats on every call and buries the run's own log.
    warnings.filterwarnings("ignore", message=r"`torch\.distributed\.\w+` is deprecated")
    if colocates(job):
        # co-located NCCL ranks (artifact.rank.colocate): NCCL reads these once, at its first
        # communicator, which the process group below may create
        for k, v in colocate_env().items():
            os.environ.setdefault(k, v)
    rank, _, local_rank, device, backend = _join(job.device, job.options)
    try:
        if rank == 0:
            RunStore(job.out).write_status(
                job.figure,
                "running",
                "started; a run stopped before it finished leaves this status",
                configs={},
            )
        ctx = _context(job, local_rank, device, backend)
        ended = _run(ctx)
        if emulation.has_peers():
            dist.barrier()  # every rank's work, and rank 0's records, are done
        if rank == 0:
            # processes started: one under emulation (the CLI's resume check counts them)
            processes = ctx.world_size if emulation.has_peers() else 1
            _finish_status(ctx.store, job.figure, ctx.reps, processes, ended)
    except BaseException:
        dist.destroy_process_group()
        raise
    # A finished run leaves without C++ teardown: once in a CI-like run, a rank that had
    # built six DeepSpeed engines aborted at exit ("terminate called without an active
    # exception", SIGABRT) after every record was written, and torchrun failed the figure.
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
