"""Every figure's configurations, torch-free: the one list its experiment walks and the
plan, the budget and the report price (docs/design.md section 2).

A spec's sweep is the function here named by its experiment (SWEEPS), called with
where the run is (`Where`) and the spec's params; `FigureSpec.configs` calls it. The
experiments (artifact/experiments/) build their workloads from these points, the cost
model (artifact/estimate/model.py) prices them, so the two cannot disagree
(tests/test_sweeps.py runs both and compares the configuration ids).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field

from artifact.core import emulated
from artifact.core.config import ComputeKind, ModelConfig, Preset, get_model
from artifact.core.emulated import nccl_channels
from artifact.core.errors import ArtifactError
from artifact.core.mechanisms import Mechanism, mechanisms
from artifact.core.options import RunOptions
from artifact.estimate import memory


@dataclass(frozen=True)
class Where:
    """Where a sweep is walked: the preset, the ranks, the device kind, the GPU's model
    (None: unknown, a CPU) and the run's options; fig9's caps once a setter has read them."""

    preset: Preset
    world: int = 1
    device: str = "cpu"  # torch.device.type: "cpu" or "cuda"
    gpu: str | None = None
    options: RunOptions = field(default_factory=RunOptions)
    cap_levels: tuple[float, ...] = ()

    @classmethod
    def of(cls, ctx, **more) -> Where:
        """A rank's: its run context's preset, world size, device, GPU and options."""
        gpu = ctx.provenance.get("gpu_model")
        return cls(ctx.preset, ctx.world_size, ctx.device.type, gpu, ctx.options, **more)

    @classmethod
    def planned(cls, preset: Preset, world: int | None = None) -> Where:
        """The plan's: the preset's device kind (its processes on a CPU), the GPU it prices."""
        if preset.device == "cpu":
            return cls(preset, world or preset.cpu_processes, "cpu")
        return cls(preset, world or 1, "cuda", PLANNED_GPU)


# The GPU the plan prices (its rates and set-up times come from one): the contention
# map's stand-in rows take its NCCL channel count
PLANNED_GPU = "H200"


@dataclass(frozen=True)
class TrainingPoint:
    """One training configuration (Figs. 4, 5, 10, 11)."""

    config_id: str
    model: str
    parallelism: str  # "fsdp" or "pipeline"
    precision: str
    micro_batch: int
    impl: str = "deepspeed"  # FSDP's implementation (run --fsdp-impl)
    recompute: bool = False
    recompute_why: str = ""


@dataclass(frozen=True)
class MicroPoint:
    """One configuration of the matmul beside a collective (Figs. 6-9, V2)."""

    config_id: str
    comm: str  # the collective: allreduce, onerank-avg, copy, coloc
    parallelism: str
    precision: str
    matmul_size: int
    comm_bytes: int
    ranks: int | None = None  # co-located NCCL ranks (comm "coloc")
    max_ctas: int | None = None  # their CTAs in all (0: NCCL's own)
    delay_fraction: float | None = None  # V2's injected delay, a fraction of the compute
    power_cap_w: float | None = None  # fig9's cap (None: uncapped)
    micro_batch: None = None

    @property
    def model(self) -> str:
        return f"matmul-{self.matmul_size}"


@dataclass(frozen=True)
class ContentionPoint:
    """One cell of the contention map: a compute kind beside a mechanism at one size."""

    config_id: str
    mech: Mechanism
    kind: ComputeKind
    comm_bytes: int
    micro_batch: None = None

    @property
    def model(self) -> str:
        return self.kind.name

    @property
    def parallelism(self) -> str:
        return self.mech.parallelism

    @property
    def precision(self) -> str:
        return self.kind.precision


Point = TrainingPoint | MicroPoint | ContentionPoint


# --- training -------------------------------------------------------------------------


def model_at(preset: Preset, name: str) -> ModelConfig:
    """The named model at the preset's sequence length (quick shortens it; paper keeps 2048)."""
    m = get_model(name)
    seq = preset.seq_len
    return dataclasses.replace(m, seq_len=seq) if seq and m.seq_len > seq else m


@dataclass(frozen=True)
class _FsdpShape:  # what artifact.estimate.memory reads of an FsdpSpec
    model: ModelConfig
    micro_batch: int
    precision: str
    recompute: bool = False
    impl: str = "deepspeed"


@dataclass(frozen=True)
class _PipelineShape:  # what artifact.estimate.memory reads of a PipelineSpec
    model: ModelConfig
    micro_batch: int
    num_microbatches: int
    precision: str
    attention: str = "sdpa"
    recompute: bool = False


def training_id(
    where: Where, model: str, tag: str, precision: str, micro_batch: int, recompute: bool
) -> str:
    """'gpt3-1.3b_fsdp_fp16_mb8_w4' (+ '_rc' with recomputation, + '_e4' as rank 0 of 4
    under --emulate-world 4): the output contract's ids."""
    rc = "_rc" if recompute else ""
    e = emulated.config_suffix(where.options.emulate_world, where.options.stand_in)
    return f"{model}_{tag}_{precision}_mb{micro_batch}_w{where.world}{rc}{e}"


def training_point(
    where: Where, model: str, parallelism: str, micro_batch: int, precision: str,
    impl: str = "deepspeed",
) -> TrainingPoint:  # fmt: skip
    """One configuration, recomputation decided as --recompute asks (auto: the preset's
    memory rule, memory.with_recompute)."""
    m, p = model_at(where.preset, model), where.preset
    if parallelism == "fsdp":
        shape = _FsdpShape(m, micro_batch, precision, impl=impl)
        tag = "fsdp" if impl == "deepspeed" else "fsdp2"  # DeepSpeed's ids predate FSDP2
    else:
        nmb = max(1, p.global_batch // micro_batch)  # data-parallel size 1
        shape, tag = _PipelineShape(m, micro_batch, nmb, precision), "pipeline"
    choice = where.options.recompute or "auto"
    shape, why = memory.with_recompute(shape, where.world, choice, p.recompute_above_gib)
    config_id = training_id(where, model, tag, precision, micro_batch, shape.recompute)
    return TrainingPoint(
        config_id, model, parallelism, precision, micro_batch, impl, shape.recompute, why
    )


def models_of(where: Where) -> list[str]:
    return list(where.options.models or where.preset.models)


def fig4(where: Where) -> list[TrainingPoint]:
    """The preset's models x micro-batches in its main precision: FSDP (each implementation
    asked for, one after the other), then the pipeline, as --parallelisms keeps them."""
    grid = [(m, mb) for m in models_of(where) for mb in where.preset.micro_batches]
    chosen = where.options.parallelisms or ("fsdp", "pipeline")
    precision = where.preset.precision
    out = []
    if "fsdp" in chosen:
        impls = where.options.fsdp_impls
        out += [training_point(where, m, "fsdp", mb, precision, i) for i in impls for m, mb in grid]
    if "pipeline" in chosen:
        out += [training_point(where, m, "pipeline", mb, precision) for m, mb in grid]
    return out


PRECISION_ONE_GPU = (
    "not run at preset {preset} on one GPU: no item of Figs. 10-11 is judged on one GPU "
    "(its collectives move no data), and their world-size-1 control is fig4's FSDP row "
    "(the same model and trainer); with --emulate-world 4, on 2+ GPUs or at preset "
    "review they run"
)


def precision_sweep_refused(where: Where) -> str | None:
    """Why Figs. 10-11 run nothing here (Preset.precision_sweep_one_gpu), else None."""
    one_gpu = where.world == 1 and where.device == "cuda" and not where.options.emulate_world
    if one_gpu and not where.preset.precision_sweep_one_gpu:
        return PRECISION_ONE_GPU.format(preset=where.preset.name)
    return None


# experiments whose sweep is empty for a reason of the preset and world alone (no reading
# of the machine): the plan quotes it, and `all` records them "not run" starting no ranks
REFUSED_HERE: dict[str, Callable[[Where], str | None]] = {
    "precision_sweep": precision_sweep_refused
}


def precision_sweep(where: Where, precisions: tuple[str, ...]) -> list[TrainingPoint]:
    """FSDP at the preset's first micro-batch, each model (--models, else the preset's
    precision_models, else its models) in every precision the spec names; none where
    precision_sweep_refused says why."""
    if precision_sweep_refused(where):
        return []
    mb = where.preset.micro_batches[0]
    models = where.options.models or where.preset.precision_models or models_of(where)
    points = [(m, p) for m in models for p in precisions]
    return [
        training_point(where, m, "fsdp", mb, p, impl)
        for impl in where.options.fsdp_impls
        for m, p in points
    ]


# --- the microbenchmark ---------------------------------------------------------------

# the one-GPU proxies beside the all-reduce, by the collective that runs
PARALLELISM = {"allreduce": "allreduce", "onerank-avg": "proxy-nccl-onerank", "copy": "proxy-copy"}


def colocated_ctas(options: RunOptions, gpu: str | None) -> int:
    """--colocate's total CTAs: --comm-ctas, or NCCL's channels for the GPU (0: NCCL's own)."""
    return options.comm_ctas or nccl_channels(gpu, options.colocate or 0) or 0


def microbench(where: Where) -> list[MicroPoint]:
    """Fig. 8's: the all-reduce; on one GPU also NCCL's one-rank kernel and a copy (the
    all-reduce there moves nothing), and with --colocate W the co-located ranks."""
    mb, options = where.preset.microbench, where.options
    size = options.matmul_size or mb.matmul_size
    precision = options.precision or mb.dtype
    comm_bytes = options.comm_bytes or mb.comm_bytes
    comms = ["allreduce"]
    if where.world == 1 and where.device == "cuda":
        comms += ["onerank-avg", "copy"]
    if options.colocate and where.world == 1:
        comms.append("coloc")
    out = []
    for comm in comms:
        parallelism, ranks, ctas = PARALLELISM.get(comm, f"coloc-w{options.colocate}"), None, None
        if comm == "coloc":
            ranks = options.colocate
            ctas = colocated_ctas(options, where.gpu) if where.device == "cuda" else 0
            parallelism = f"coloc-nccl-{ctas}cta-w{ranks}" if ctas else parallelism
        config_id = f"matmul-{size}_{precision}_{parallelism}_{comm_bytes >> 20}MiB_w{where.world}"
        out.append(
            MicroPoint(config_id, comm, parallelism, precision, size, comm_bytes, ranks, ctas)
        )
    return out


def v2(where: Where) -> list[MicroPoint]:
    """Fig. 8's configuration whose collective occupies the device here (one GPU: NCCL's
    one-rank kernel; the all-reduce runs none), at each of the preset's delays."""
    by_comm = {p.comm: p for p in microbench(where)}
    base = by_comm.get("onerank-avg") or by_comm["allreduce"]
    return [
        dataclasses.replace(base, config_id=f"{base.config_id}_delay{f:g}", delay_fraction=f)
        for f in where.preset.v2.delay_fractions
    ]


# fig9: the paper's caps (A100 x4, 300 W down to 100 W), mapped onto this GPU's range
PAPER_CAPS_W = (300.0, 250.0, 200.0, 150.0, 100.0)
PAPER_RANGE_W = (100.0, 400.0)  # A100 SXM: allowed power limits
POWER_LEVELS = 1 + len(PAPER_CAPS_W)  # uncapped, then each cap


def cap_tag(level: float | None) -> str:
    return "uncapped" if level is None else f"cap{level:g}W"


def fig9(where: Where) -> list[MicroPoint]:
    """Fig. 8's configurations uncapped and under each cap, one list a level; none
    without --allow-power-cap (capping changes the machine)."""
    if not where.options.allow_power_cap:
        return []
    return [
        dataclasses.replace(p, config_id=f"{p.config_id}_{cap_tag(level)}", power_cap_w=level)
        for level in (None, *where.cap_levels)
        for p in microbench(where)
    ]


# --- the contention map ---------------------------------------------------------------


def contention_axes(preset: Preset, options: RunOptions) -> tuple[list[ComputeKind], list[int]]:
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


def mechanisms_here(where: Where) -> list[Mechanism]:
    """This machine's mechanisms, narrowed to the preset's SMs-held sizes and co-located
    worlds; --colocate W keeps the co-located rows (and twins) of W alone."""
    options = where.options
    limits = where.preset.contention.cta_limits
    found = mechanisms(where.world, where.device, limits, where.gpu, options.comm_ctas)
    sweep = where.preset.contention
    axes = options.axes_chosen or sweep.axes
    found = [m for m in found if m.axis in axes]
    if sweep.sm_held is not None:  # the preset's SMs-held sizes (compute-first twins too)
        found = [m for m in found if m.comm != "spin" or m.spec["ctas"] in sweep.sm_held]
    worlds = (options.colocate,) if options.colocate else sweep.colocated_worlds
    if worlds is not None:
        found = [
            m
            for m in found
            if (m.comm != "coloc" and not m.twin_of) or m.spec.get("ranks") in worlds
        ]
    return found


def contention(where: Where) -> list[ContentionPoint]:
    """mechanisms x compute kinds x sizes; one GPU's mechanism axis (what holds compute
    back) beside the GEMMs at one size."""
    at = where.preset.contention.mechanism_at_bytes
    kinds, sizes = contention_axes(where.preset, where.options)
    out = []
    for mech in mechanisms_here(where):
        for kind in kinds if mech.every_size else [k for k in kinds if k.compute == "gemm"]:
            for size in sizes if mech.every_size else [b for b in sizes if b == at]:
                config_id = f"{kind.name}_{mech.parallelism}_{size >> 10}KiB_w{where.world}"
                out.append(ContentionPoint(config_id, mech, kind, size))
    return out


# the sweeps of training steps (their points are TrainingPoints)
TRAINING_SWEEPS = (fig4, precision_sweep)

# each experiment's sweep (FigureSpec.experiment); its keyword arguments are the spec's
# params, the same its experiment's run(ctx, ...) takes
SWEEPS: dict[str, Callable[..., list]] = {
    "fig4": fig4,
    "precision_sweep": precision_sweep,
    "fig6": microbench,
    "fig7": microbench,
    "fig8": microbench,
    "fig9": fig9,
    "v2": v2,
    "contention": contention,
}
