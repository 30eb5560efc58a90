"""Beyond the paper: the contention map (`nox -s contention`).

The paper blames its slowdowns on shared memory bandwidth and power, but shows one
1 GiB all-reduce beside one matmul (Fig. 8). This sweeps communication size against
compute intensity, through Fig. 8's microbenchmark and measurement (no copy of either):
- communication size: the preset's sizes (quick and paper: 1 MiB ... 4 GiB);
- compute: GEMMs in bf16 / fp16 / tf32 / fp32 (compute-bound) and an elementwise add
  (memory-bound), each sized to about the same time per iteration;
- mechanism: with several GPUs, the real all-reduce with NCCL's default CTA count and
  with its communicator limited to a few CTAs (SM contention shrinks, bandwidth stays);
  on one GPU, NCCL's one-rank kernel (SM-driven) beside the copy-engine copy (bandwidth
  only), since one rank's kernel ignores CTA limits (0.756 ms for 1 GiB by default and
  0.790 ms at one CTA on an H200, benchmarks/contention_probe.py).
Every point reports compute and communication slowdown (both sides can slow), the
compute's achieved bandwidth, the overlap fraction and, at one size, power. The
collectives are spread over the compute units (Fig. 8 issues them all first): small
collectives finish within the host's launch time, and issued first they would all run
before the compute started (measured on an H200: overlap fraction 0.00 at 1 and 16 MiB).
"""

from __future__ import annotations

from artifact.core.config import Preset
from artifact.core.errors import ArtifactError
from artifact.core.options import RunOptions
from artifact.experiments import fig8
from artifact.run.runner import ConfigPoint, RunContext
from artifact.workloads.microbench import MicrobenchSpec
from artifact.workloads.precision import dtype_of


def mechanisms(world_size: int, device_type: str, cta_limits: tuple[int, ...]) -> list[tuple]:
    """(comm, CTA limit, parallelism label, note) for this machine."""
    if world_size == 1 and device_type == "cuda":
        return [
            ("onerank-avg", 0, "proxy-nccl-onerank", fig8.ONE_GPU_NOTES["onerank-avg"]),
            ("copy", 0, "proxy-copy", fig8.ONE_GPU_NOTES["copy"]),
        ]
    if device_type != "cuda":  # gloo has no CTAs
        return [("allreduce", 0, "allreduce", "")]
    return [
        (
            "allreduce",
            ctas,
            "allreduce" if ctas == 0 else f"allreduce-{ctas}cta",
            "" if ctas == 0 else f"NCCL communicator limited to {ctas} CTAs (min = max)",
        )
        for ctas in cta_limits
    ]


def sweep_of(preset: Preset, options: RunOptions) -> tuple[list, list[int]]:
    """The preset's compute kinds and sizes, narrowed by --precision and --comm-mib."""
    sweep = preset.contention
    kinds = [k for k in sweep.computes if options.precision in (None, k.precision)]
    sizes = [b for b in sweep.comm_bytes if options.comm_bytes in (None, b)]
    if not kinds:
        precisions = ", ".join(dict.fromkeys(k.precision for k in sweep.computes))
        raise ArtifactError(
            f"no contention point with precision {options.precision!r} in preset "
            f"{preset.name!r}; accepted: {precisions}"
        )
    if not sizes:
        mibs = ", ".join(str(b >> 20) for b in sweep.comm_bytes if b >= 1 << 20)
        raise ArtifactError(
            f"no contention point of {options.comm_bytes >> 20} MiB in preset "
            f"{preset.name!r}; accepted --comm-mib: {mibs or 'none (sizes below 1 MiB)'}"
        )
    return kinds, sizes


def check_options(preset: Preset, options: RunOptions) -> None:
    """Refuse, before anything runs, a precision or size the preset's sweep does not hold."""
    sweep_of(preset, options)


def configs(ctx: RunContext) -> list[ConfigPoint]:
    sweep = ctx.preset.contention
    kinds, sizes = sweep_of(ctx.preset, ctx.options)
    gpu = ctx.provenance.get("gpu_model") or "cpu"
    out = []
    for comm, ctas, parallelism, note in mechanisms(
        ctx.world_size, ctx.device.type, sweep.cta_limits
    ):
        for kind in kinds:
            for size in sizes:
                spec = MicrobenchSpec(
                    matmul_size=kind.size if kind.compute == "gemm" else 0,
                    precision=kind.precision,
                    comm_bytes=size,
                    matmuls_per_iter=kind.units,
                    comm=comm,
                    compute=kind.compute,
                    add_numel=kind.size if kind.compute == "add" else 0,
                    max_ctas=ctas,
                    interleave=True,
                )
                item = dtype_of(kind.precision).itemsize
                config_id = f"{kind.name}_{parallelism}_{size >> 10}KiB_w{ctx.world_size}"
                config = {
                    "gpu": gpu,
                    "model": kind.name,
                    "parallelism": parallelism,
                    "precision": kind.precision,
                    "world_size": ctx.world_size,
                    "comm_bytes": size,
                    "compute": kind.compute,
                    "compute_size": kind.size,
                    "units_per_iter": kind.units,
                    "intensity_flop_per_byte": spec.intensity(item),
                    "comm": comm,
                    "max_ctas": ctas,
                    "proxy": comm != "allreduce",
                    "note": note,
                }
                out.append(ConfigPoint(config_id, config, spec))
    return out


def run(ctx: RunContext) -> None:
    sweep = ctx.preset.contention
    fig8.run_configs(
        ctx,
        configs(ctx),
        max_repeats=sweep.max_repeats,
        iters=sweep.iters,  # the grid is large: fewer iterations a pass than the preset's
        timed_s=0.0,  # and no time floor beyond the power window
        # power is slow to measure (100 ms NVML refresh): held at one size only
        power_window_of=lambda config: (
            sweep.power_window_s if config["comm_bytes"] == sweep.power_at_bytes else 0.0
        ),
    )
