"""Beyond the paper: the contention map (`nox -s contention`).

The paper blames its slowdowns on shared memory bandwidth and power, but shows one
1 GiB all-reduce beside one matmul (Fig. 8). This sweeps communication size against
compute intensity, through Fig. 8's microbenchmark and measurement (no copy of either):
- communication size: the preset's sizes (quick and paper: 1 MiB ... 4 GiB);
- compute: GEMMs in bf16 / fp16 / tf32 / fp32 (compute-bound) and an elementwise add
  (memory-bound), each sized to about the same time per iteration;
- mechanism (artifact.core.mechanisms): with several GPUs, the real all-reduce with
  NCCL's default CTA count and with its communicator limited to a few CTAs (SM contention
  shrinks, bandwidth stays); on one GPU, NCCL's one-rank kernel (SM-driven) beside the
  copy-engine copy (bandwidth only), and at the paper's 1 GiB what holds compute back:
  SMs held with no bytes, the NCCL-shaped stand-in, real NCCL ranks co-located on the
  GPU and the stand-in's twin of each (the validation).
Every point reports compute and communication slowdown (both sides can slow), the
compute's achieved bandwidth, the overlap fraction and, at one size, power. The
collectives are spread over the compute units (Fig. 8 issues them all first): small
collectives finish within the host's launch time, and issued first they would all run
before the compute started (measured on an H200: overlap fraction 0.00 at 1 and 16 MiB).
"""

from __future__ import annotations

import dataclasses

from artifact.core.config import Preset
from artifact.core.mechanisms import Mechanism
from artifact.core.options import RunOptions
from artifact.experiments import configs_of, fig8
from artifact.figures.sweeps import contention_axes
from artifact.rank.runner import ConfigPoint, RunContext, broadcast, record_not_run
from artifact.workloads.microbench import MicrobenchSpec
from artifact.workloads.precision import dtype_of

# the spec fields of the order and mitigation axes a row's config carries where set
KNOB_FIELDS = ("order", "nccl_policy", "cap_ctas", "carveout")


def check_options(preset: Preset, options: RunOptions) -> None:
    """Refuse, before anything runs, a precision or size the preset's sweep does not hold."""
    contention_axes(preset, options)


def configs(ctx: RunContext) -> list[tuple[ConfigPoint, Mechanism]]:
    """The sweep's cells (artifact.figures.sweeps.contention) as the microbenchmark builds them."""
    gpu = ctx.provenance.get("gpu_model") or "cpu"
    out = []
    for point in configs_of(ctx):
        mech, kind, size = point.mech, point.kind, point.comm_bytes
        spec = MicrobenchSpec(
            matmul_size=kind.size if kind.compute == "gemm" else 0,
            precision=kind.precision,
            comm_bytes=size,
            matmuls_per_iter=kind.units,
            comm=mech.comm,
            compute=kind.compute,
            add_numel=kind.size if kind.compute == "add" else 0,
            interleave=True,
            **mech.spec,
        )
        item = dtype_of(kind.precision).itemsize
        config = {
            "gpu": gpu,
            "model": kind.name,
            "parallelism": mech.parallelism,
            "precision": kind.precision,
            "world_size": ctx.world_size,
            "comm_bytes": size,
            "compute": kind.compute,
            "compute_size": kind.size,
            "units_per_iter": kind.units,
            "intensity_flop_per_byte": spec.intensity(item),
            "comm": mech.comm,
            "max_ctas": mech.spec.get("max_ctas", 0),
            "ctas": mech.spec.get("ctas", mech.spec.get("max_ctas", 0)),
            "ranks": mech.spec.get("ranks", 0),
            "proxy": mech.proxy,
            "note": mech.note,
            **({"twin_of": mech.twin_of} if mech.twin_of else {}),
            # the order and mitigation axes (absent from the base axis's rows, as before)
            **({"axis": mech.axis} if mech.axis != "base" else {}),
            **({"knob": mech.knob} if mech.knob else {}),
            **{k: mech.spec[k] for k in KNOB_FIELDS if k in mech.spec},
        }
        out.append((ConfigPoint(point.config_id, config, spec), mech))
    return out


def _refusal(ctx: RunContext, mech: Mechanism) -> str | None:
    """Why a mechanism cannot run here: its own reason, too old an NCCL to co-locate, or a
    knob the loaded NCCL or torch lacks."""
    if mech.refused:
        return mech.refused
    if ctx.device.type != "cuda":
        return None
    from artifact.rank import colocate

    if (mech.comm == "coloc" or mech.twin_of) and (why := colocate.refusal()):  # a twin times NCCL
        return why
    return knob_refusal(mech.spec)


def knob_refusal(spec: dict, has_carveout: bool | None = None) -> str | None:
    """Why a mitigation knob cannot be turned here (one line), or None. `has_carveout`:
    the seam the tests replace (default: whether this torch has the SM carve-out)."""
    import torch

    from artifact.rank import colocate

    if policy := spec.get("nccl_policy"):
        return colocate.policy_refusal(policy)
    if spec.get("carveout"):
        has = (
            hasattr(torch._C, "_set_sm_carveout_experimental")
            if has_carveout is None
            else has_carveout
        )
        if not has:
            return f"torch {torch.__version__} has no SM carve-out (torch._C._set_sm_carveout_experimental)"
    return None


def _earlier_pace(ctx: RunContext, config_id: str) -> float | None:
    """The pace a resumed twin's repetitions on disk ran at: a row keeps one pace."""
    paces = None
    if ctx.is_writer:
        records = ctx.store.records(ctx.figure, config_id)
        paces = sorted(
            {r["config"]["paced_to_ms"] for r in records if "paced_to_ms" in r["config"]}
        )
    paces = broadcast(paces)
    return paces[0] if paces else None


def run(ctx: RunContext) -> None:
    sweep = ctx.preset.contention
    points, coloc_ms, every_size = [], {}, set()
    for point, mech in configs(ctx):
        if mech.every_size:
            every_size.add(mech.parallelism)
        if why := _refusal(ctx, mech):
            record_not_run(ctx, point.config_id, why)
            continue
        points.append(point)

    choices: dict = {}

    def prepare(point: ConfigPoint) -> ConfigPoint | None:
        """A twin is paced to its co-located NCCL's time a collective, measured now; a
        co-located row carries what NCCL chose (fig8.with_nccl_choices)."""
        twin_of = point.config.get("twin_of")
        if not twin_of:
            return fig8.with_nccl_choices(ctx, choices, point)
        key = (twin_of, point.spec.comm_bytes, point.spec.precision)
        if key not in coloc_ms and (ms := _earlier_pace(ctx, point.config_id)) is not None:
            coloc_ms[key] = ms
        if key not in coloc_ms:
            coloc_ms[key] = fig8.collective_ms(
                ctx,
                dataclasses.replace(
                    point.spec, comm="coloc", max_ctas=point.spec.ctas, ctas=0, copies=1
                ),
            )
        ms = coloc_ms[key]
        spec = dataclasses.replace(point.spec, pace_ms=ms)
        return ConfigPoint(point.config_id, {**point.config, "paced_to_ms": ms}, spec)

    fig8.run_configs(
        ctx,
        points,
        max_repeats=sweep.max_repeats,
        iters=sweep.iters,  # the grid is large: fewer iterations a pass than the preset's
        timed_s=0.0,  # and no time floor beyond the power window
        # power is slow to measure (100 ms NVML refresh): held at one size only
        power_window_of=lambda config: sweep.power_window_at(
            config["comm_bytes"], config["parallelism"] in every_size
        ),
        prepare=prepare,
    )
