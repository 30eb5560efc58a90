"""The contention map's mechanisms: what runs beside the compute, by machine (torch-free:
the experiment and the plan's cost model both read it).

With several GPUs: the real all-reduce at NCCL's default CTA count and with its
communicator limited to a few CTAs. On a CPU: gloo's all-reduce. On one GPU, where an
all-reduce moves nothing, the question is what holds compute back (the report's "What
holds compute back on one GPU"):
- NCCL's one-rank kernel (SM-driven) and a copy-engine copy (bytes only, no SMs), at
  every size of the sweep;
- beside the GEMMs at one size (`ContentionConfig.mechanism_at_bytes`, the paper's 1 GiB):
  SMs held and no bytes (the NCCL-shaped kernel spinning on C SMs, C in SM_HELD, for as
  long as rank 0's ring all-reduce takes on the link at STAND_IN_WORLD);
  the NCCL-shaped stand-in itself (rank 0 of STAND_IN_WORLD, NCCL's channel count, paced
  to the link); real NCCL ranks co-located on the GPU (W in COLOCATED_WORLDS, NCCL's
  channel count of CTAs in all); and each one's twin: the stand-in doing every co-located
  rank's ring with the same total CTAs, paced to the time co-located NCCL took (the
  validation: emulated.VALIDATION_POINTS).

Two more axes at that size (`--axes`; docs/measurement.md, "What frees the compute"):
- order: the SMs-held rows and co-located NCCL at NCCL's defaults with each collective
  queued after the compute it overlaps (compute-first) instead of before it
  (holder-first, every other row): wave quantization shows where a GEMM that holds every
  SM in one wave meets a holder that started first;
- mitigation: co-located NCCL (several GPUs: the real all-reduce) at NCCL's defaults and
  under each knob a user can turn: NCCL's CTA policy (efficiency, zero), NCCL's max_ctas
  (MITIGATION_CAPS), and torch's SM carve-out for the GEMM equal to NCCL's CTAs. The copy
  engine is the base axis's copy row.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from artifact.core.emulated import LINK_GBS, link_gbs, nccl_channels, ptx_refusal

SM_HELD = (4, 8, 16, 24, 32)  # CTAs of the spin-only kernel
STAND_IN_WORLD = 4  # the W the stand-in and the spin stand for (the paper's 4 GPUs)
COLOCATED_WORLDS = (2, 4)
# the validation rule: the stand-in's slowdown within this many points of co-located
# NCCL's at the same total CTAs and bytes
VALIDATION_POINTS = 3.0
AXES = ("base", "order", "mitigation")
MITIGATION_CAPS = (4, 8, 16)  # NCCL's max_ctas a communicator
POLICIES = ("efficiency", "zero")  # NCCL's CTA policies beside its default

ONE_GPU_NOTES = {
    "allreduce": "one GPU: the all-reduce moves no data and runs no kernel",
    "onerank-avg": "proxy: NCCL's one-rank AVG all-reduce kernel (reads and writes the buffer on SMs) stands in for the all-reduce (one GPU)",
    "copy": "proxy: a device-to-device copy of the same size (copy engine) stands in for the all-reduce (one GPU)",
    "spin": "proxy: SMs held, no bytes: {ctas} CTAs spin for as long as rank 0's ring all-reduce at W = {ranks} takes on the link (one GPU)",
    "nccl-shaped": "stand-in: the NCCL-shaped kernel, rank 0's ring all-reduce at W = {ranks} on {ctas} CTAs paced to the link (one GPU; not validated on this GPU)",
    "coloc": "co-located: {ranks} real NCCL ranks on this one GPU, one thread a rank, {ctas} CTAs in all (NCCL_MULTI_RANK_GPU_ENABLE)",
    "twin": "stand-in: the NCCL-shaped kernel doing all {ranks} co-located ranks' rings on {ctas} CTAs in all, paced to co-located NCCL's time a collective (the validation's twin)",
    "compute-first": " (compute-first: each collective queued after the compute it overlaps)",
    "coloc-ranks": "co-located: {ranks} real NCCL ranks on this one GPU, ",  # + the row's knob
}
KNOB_NOTES = {
    "default": "NCCL's defaults (no CTA setting)",
    "policy": "NCCL's CTA policy {policy}",
    "cap": "NCCL's max_ctas {cap} a communicator",
    "carveout": "torch's SM carve-out of {sms} SMs for the matmuls (NCCL's CTAs)",
    "capped": "NCCL's channel count, {ctas} CTAs in all (min = max a communicator)",
    "total": "{cap} CTAs in all (min = max a communicator)",
}


@dataclass(frozen=True)
class Mechanism:
    """One mechanism: the microbenchmark's collective, its label (the config's parallelism),
    its note, the spec fields it sets, and whether it runs at every size or at one."""

    comm: str
    parallelism: str
    note: str
    spec: dict[str, Any] = field(default_factory=dict)
    every_size: bool = True
    refused: str | None = None  # why it cannot run here (recorded "not run")
    twin_of: str | None = None  # the co-located mechanism a twin is paced to
    axis: str = "base"  # one of AXES
    knob: str = ""  # the mitigation axis's knob (KNOB_NOTES), where it has one

    @property
    def proxy(self) -> bool:
        return self.comm != "allreduce"


def mechanisms(
    world: int,
    device_type: str,
    cta_limits: tuple[int, ...],
    gpu: str | None = None,
    comm_ctas: int | None = None,
) -> list[Mechanism]:
    """The mechanisms for this machine (contention.py runs them; the plan prices them)."""
    if device_type != "cuda":  # gloo has no CTAs
        return [Mechanism("allreduce", "allreduce", "")]
    if world > 1:
        return [
            Mechanism(
                "allreduce",
                "allreduce" if c == 0 else f"allreduce-{c}cta",
                "" if c == 0 else f"NCCL communicator limited to {c} CTAs (min = max)",
                {"max_ctas": c},
            )
            for c in cta_limits
        ] + mitigations("allreduce", "allreduce", {}, comm_ctas or nccl_channels(gpu, world))
    base = _one_gpu_axis(gpu, comm_ctas)
    return [
        Mechanism("onerank-avg", "proxy-nccl-onerank", ONE_GPU_NOTES["onerank-avg"]),
        Mechanism("copy", "proxy-copy", ONE_GPU_NOTES["copy"]),
        *base,
        *_order_axis(base, gpu, comm_ctas),
        *[
            m
            for cw in COLOCATED_WORLDS
            for m in mitigations(
                "coloc",
                f"coloc-nccl-{{knob}}-w{cw}",
                {"ranks": cw},
                comm_ctas or nccl_channels(gpu, cw),
                ONE_GPU_NOTES["coloc-ranks"].format(ranks=cw),
            )
        ],
    ]


def mitigations(
    comm: str, label: str, spec: dict[str, Any], nccl_ctas: int | None, prefix: str = ""
) -> list[Mechanism]:
    """The mitigation axis for one collective: NCCL's defaults, then each knob (`label`'s
    {knob} names it; a plain label gets it appended). `nccl_ctas`: the CTAs NCCL takes at
    its defaults here, the carve-out's size (None: unknown, the row refused)."""
    name = label if "{knob}" in label else label + "-{knob}"
    real = comm == "allreduce"  # real ranks: the base axis's all-reduce is NCCL's defaults
    sms = nccl_ctas or 0
    # Co-located ranks take turns on one GPU's SMs: their kernels must all be resident at
    # once, so their CTAs stay capped (min = max; at NCCL's own defaults 4 ranks hung in
    # set-up on one H100). Their "default" is NCCL's channel count in all, each cap a total.
    base = {} if real else {"max_ctas": sms}
    cap = "cap_ctas" if real else "max_ctas"
    rows = [("default", base, KNOB_NOTES["default" if real else "capped"].format(ctas=sms))]
    rows += [
        (f"policy-{p}", {**base, "nccl_policy": p}, KNOB_NOTES["policy"].format(policy=p))
        for p in POLICIES
    ]
    rows += [
        (f"max{c}cta", {cap: c}, KNOB_NOTES["cap" if real else "total"].format(cap=c))
        for c in MITIGATION_CAPS
        if real or c != sms  # a co-located total equal to the default's is its row
    ]
    rows += [
        (
            f"carveout{sms}",
            {**base, "carveout": sms},
            KNOB_NOTES["carveout"].format(sms=sms or "?"),
        )
    ]
    out = []
    for knob, extra, note in rows:
        if real and knob == "default":
            continue
        refused = (
            "no NCCL channel count known for this GPU, so no carve-out size; pass --comm-ctas"
            if knob.startswith("carveout") and not sms
            # co-located ranks uncapped hang (above): no count, no row
            else "no NCCL channel count known for this GPU to cap co-located ranks at; pass --comm-ctas"
            if not real and not sms and not knob.startswith("max")
            else None
        )
        out.append(
            Mechanism(
                comm,
                name.format(knob=knob),
                prefix + note,
                {**spec, **extra},
                False,  # at the map's one size, beside the GEMMs
                refused,
                axis="mitigation",
                knob="carveout" if knob.startswith("carveout") else knob,
            )
        )
    return out


def _order_axis(base: list[Mechanism], gpu: str | None, comm_ctas: int | None) -> list[Mechanism]:
    """Compute-first twins of the base axis's SMs-held rows and of co-located NCCL at its
    capped default."""
    first = {"order": "compute-first"}
    spins = {m.parallelism: m for m in base if m.comm == "spin"}
    out = [
        Mechanism(
            m.comm,
            f"{label}-compute-first",
            m.note + ONE_GPU_NOTES["compute-first"],
            {**m.spec, **first},
            False,
            m.refused,
            axis="order",
        )
        for label, m in spins.items()
    ]
    ctas = {cw: comm_ctas or nccl_channels(gpu, cw) for cw in COLOCATED_WORLDS}
    out += [
        Mechanism(
            "coloc",
            f"coloc-nccl-default-w{cw}-compute-first",
            ONE_GPU_NOTES["coloc-ranks"].format(ranks=cw)
            + KNOB_NOTES["capped"].format(ctas=ctas[cw] or "?")
            + ONE_GPU_NOTES["compute-first"],
            {"ranks": cw, "max_ctas": ctas[cw] or 0, **first},
            False,
            None if ctas[cw] else "no NCCL channel count known for this GPU; pass --comm-ctas",
            axis="order",
        )
        for cw in COLOCATED_WORLDS
    ]
    return out


def _one_gpu_axis(gpu: str | None, comm_ctas: int | None) -> list[Mechanism]:
    w = STAND_IN_WORLD
    known = any(m in (gpu or "") for m in LINK_GBS)
    link = link_gbs(gpu, None) if known else 0.0
    no_link = (
        None if known else f"no link bandwidth known for GPU {gpu!r} (known: {', '.join(LINK_GBS)})"
    )
    ctas = comm_ctas or nccl_channels(gpu, w)
    no_ctas = None if ctas else f"no NCCL channel count known for GPU {gpu!r}; pass --comm-ctas"
    ctas = ctas or 16  # a label only: the row is refused
    no_ptx = ptx_refusal(gpu, "the NCCL-shaped stand-in and the SMs-held rows")
    out = []  # co-located NCCL and its twins first: the validation is what matters most
    for cw in COLOCATED_WORLDS:
        coloc = f"coloc-nccl-{ctas}cta-w{cw}"
        out.append(
            Mechanism(
                "coloc",
                coloc,
                ONE_GPU_NOTES["coloc"].format(ctas=ctas, ranks=cw),
                {"ranks": cw, "max_ctas": ctas},
                False,
                no_ctas,
            )
        )
        out.append(
            Mechanism(
                "nccl-shaped",
                f"standin-{ctas}cta-coloc-w{cw}",
                ONE_GPU_NOTES["twin"].format(ctas=ctas, ranks=cw),
                {"ctas": ctas, "ranks": cw, "copies": cw},
                False,
                no_ptx or no_ctas,
                twin_of=coloc,
            )
        )
    out.append(
        Mechanism(
            "nccl-shaped",
            f"standin-{ctas}cta-w{w}",
            ONE_GPU_NOTES["nccl-shaped"].format(ctas=ctas, ranks=w),
            {"ctas": ctas, "ranks": w, "link_gbps": link},
            False,
            no_ptx or no_link or no_ctas,
        )
    )
    out += [
        Mechanism(
            "spin",
            f"sm-held-{c}cta",
            ONE_GPU_NOTES["spin"].format(ctas=c, ranks=w),
            {"ctas": c, "ranks": w, "link_gbps": link},
            False,
            no_ptx or no_link,
        )
        for c in SM_HELD
    ]
    return out
