"""RunOptions: the experiment knobs of one `run`, checked once, then read-only.

The CLI builds it from the flags (`from_flags`), which checks every value against what is
accepted; it travels to every rank as JSON (`as_json`, `from_json`) and is compared with
a results folder's plan.json in that same JSON form. A field left None means "the
preset's or the figure's default", and None fields are left out of the JSON, so plans
written before a field existed still resume. Which figures take which field: each
figure's spec (`FigureSpec.options`, these field names).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from artifact.core.config import MODELS, PARALLELISMS, PRECISIONS, check_precision, get_model
from artifact.core.emulated import check_ctas, check_link, check_stand_in, check_world
from artifact.core.errors import ArtifactError, bad_choice, check_positive
from artifact.core.mechanisms import AXES

# `--recompute`: activation recomputation where memory needs it (the default), always or
# never (artifact.estimate.memory decides "auto").
RECOMPUTE_CHOICES = ("auto", "on", "off")

# FSDP's implementations (`run --fsdp-impl`): DeepSpeed ZeRO-3, the paper's and the
# default, and torch's FSDP2 (artifact.workloads.fsdp2). Here, so the CLI checks the flag
# before torch loads.
FSDP_IMPLS: tuple[str, ...] = ("deepspeed", "fsdp2")
PAPER_FSDP_IMPL = FSDP_IMPLS[0]


def beyond_paper(config: dict) -> bool:
    """Whether a configuration ran an FSDP implementation other than the paper's: the
    report shows its rows, compare judges no item of the paper on them."""
    return config.get("fsdp_impl", PAPER_FSDP_IMPL) != PAPER_FSDP_IMPL


def _flag(flag: str, help: str, *, figures: bool = False, **parse: Any) -> Any:
    """A field that defaults to None and declares the CLI flag that sets it: its --help
    text (led by the figures that take it, where `figures`) and argparse's keywords
    (type, choices, action) in `parse`. artifact/arguments.py adds `run`'s flags from these."""
    return field(
        default=None, metadata={"flag": flag, "help": help, "figures": figures, "parse": parse}
    )


@dataclass(frozen=True)
class RunOptions:
    precision: str | None = _flag("--precision", f"one of {', '.join(PRECISIONS)}", figures=True)
    matmul_size: int | None = _flag("--matmul-size", "M=N=K of the matmul", figures=True, type=int)
    comm_bytes: int | None = _flag(  # bytes; the flag takes MiB
        "--comm-mib", "all-reduce size in MiB (paper: 1024)", figures=True, type=int
    )
    power_interval_s: float | None = _flag(  # seconds; the flag takes ms
        "--power-interval-ms", "power sampling interval (default 20 ms)", type=int
    )
    models: tuple[str, ...] | None = _flag(
        "--models", "comma-separated model names (FSDP and pipeline figures)"
    )
    parallelisms: tuple[str, ...] | None = _flag(
        "--parallelisms", "fsdp, pipeline or both (default both)", figures=True
    )
    recompute: str | None = _flag(  # auto (None), on, off
        "--recompute",
        "activation recomputation (training figures): auto (default) turns it on where "
        "the preset's memory rule says a configuration would not fit without it",
        choices=RECOMPUTE_CHOICES,
    )
    # the FSDP implementations, comma-separated in the order run; None: deepspeed alone
    # (the paper's), left out so plans from before the flag resume
    fsdp_impl: str | None = _flag(
        "--fsdp-impl",
        "FSDP rows through deepspeed (ZeRO-3, the paper's; default), fsdp2 (torch) or both "
        "side by side (deepspeed,fsdp2)",
        figures=True,
    )
    allow_power_cap: bool | None = _flag(
        "--allow-power-cap",
        "let the run change GPU power limits (restored afterwards; never on shared machines)",
        figures=True,
        action="store_true",
    )
    # rank 0 of this many ranks alone on one device (artifact.rank.emulation)
    emulate_world: int | None = _flag(
        "--emulate-world",
        "run rank 0 of W ranks alone on one device (fake process group, its traffic as "
        "paced local copies; records are labelled emulated)",
        figures=True,
    )
    link_gbps: float | None = _flag(  # emulated link, GB/s one way
        "--link-gbps",
        "with --emulate-world: the link's bandwidth in GB/s (gigabytes a second, one "
        "direction; default by GPU model, e.g. 450 for H100/H200 NVLink)",
    )
    stand_in: str | None = _flag(  # copy (None) or nccl-shaped
        "--stand-in",
        "with --emulate-world: what moves rank 0's bytes: copy (paced copies, the default) "
        "or nccl-shaped (one persistent kernel of C CTAs a collective, as NCCL's ring)",
    )
    comm_ctas: int | None = _flag(  # the stand-in's CTAs, or --colocate's total
        "--comm-ctas",
        "CTAs of the NCCL-shaped stand-in (default: NCCL's channels for the GPU model, "
        "artifact/data/nccl_channels.json), or the total CTAs of --colocate's ranks",
    )
    colocate: int | None = _flag(  # W real NCCL ranks on one GPU (fig8, contention)
        "--colocate",
        "W real NCCL ranks on this one GPU, one thread a rank (needs NCCL 2.30 or newer)",
        figures=True,
    )
    axes: str | None = _flag(  # the contention map's axes, comma-separated (None: all)
        "--axes",
        "the axes to run, comma-separated: base (the map and what holds compute back), "
        "order (compute-first beside holder-first), mitigation (NCCL's CTA policies and "
        "max_ctas, torch's SM carve-out); default all",
        figures=True,
    )
    # the stopping rule in the run loop: the repetitions become a maximum (runner.pending)
    adaptive: bool | None = _flag(
        "--adaptive",
        "the stopping rule: --reps (or the preset's) becomes the most repetitions; each "
        "configuration runs 5, then as many as its judged quantities need (docs/measurement.md)",
        action="store_true",
    )

    def __post_init__(self):
        if self.precision is not None:
            check_precision(self.precision)
        check_positive("--matmul-size", self.matmul_size)
        check_positive("--comm-mib", self.comm_bytes)  # a positive MiB count is >= 1 byte
        if self.power_interval_s is not None:
            check_positive("--power-interval-ms", self.power_interval_s * 1e3)
        for model in self.models or ():
            get_model(model)
        if self.models is not None and not self.models:
            raise bad_choice("model", "", MODELS)
        for p in self.parallelisms or ():
            if p not in PARALLELISMS:
                raise bad_choice("parallelism", p, PARALLELISMS)
        if self.recompute is not None and self.recompute not in RECOMPUTE_CHOICES:
            raise bad_choice("--recompute", self.recompute, RECOMPUTE_CHOICES)
        for impl in self.fsdp_impls:
            if impl not in FSDP_IMPLS:
                raise bad_choice("FSDP implementation", impl, FSDP_IMPLS)
        if len(set(self.fsdp_impls)) < len(self.fsdp_impls):
            raise ArtifactError(f"--fsdp-impl {self.fsdp_impl!r} names an implementation twice")
        if self.emulate_world is not None:
            check_world(self.emulate_world)
        if self.link_gbps is not None:
            check_link(self.link_gbps)
            if self.emulate_world is None:
                raise ArtifactError(
                    "--link-gbps paces emulated traffic; it needs --emulate-world W"
                )
        if self.stand_in is not None:
            check_stand_in(self.stand_in)
            if self.emulate_world is None:
                raise ArtifactError(
                    "--stand-in chooses emulated traffic; it needs --emulate-world W"
                )
        if self.colocate is not None:
            check_world(self.colocate, "--colocate")
        for axis in self.axes_chosen:
            if axis not in AXES:
                raise bad_choice("--axes axis", axis, AXES)
        if self.comm_ctas is not None:
            check_ctas(self.comm_ctas)
            if self.stand_in != "nccl-shaped" and self.colocate is None:
                raise ArtifactError(
                    "--comm-ctas sets the CTAs of --stand-in nccl-shaped or of --colocate W; "
                    "it needs one of them"
                )

    @property
    def axes_chosen(self) -> tuple[str, ...]:
        return tuple(a.strip() for a in self.axes.split(",")) if self.axes else ()

    @property
    def fsdp_impls(self) -> tuple[str, ...]:
        return tuple(self.fsdp_impl.split(",")) if self.fsdp_impl else ("deepspeed",)

    @classmethod
    def from_flags(
        cls,
        *,
        precision=None,
        matmul_size=None,
        comm_mib=None,
        power_interval_ms=None,
        models=None,
        parallelisms=None,
        recompute=None,
        fsdp_impl=None,
        allow_power_cap=False,
        emulate_world=None,
        link_gbps=None,
        stand_in=None,
        comm_ctas=None,
        colocate=None,
        adaptive=False,
        axes=None,
    ) -> RunOptions:
        """The options as the CLI's flags give them (MiB, ms, comma lists)."""
        impls = fsdp_impl and ",".join(i.strip() for i in fsdp_impl.split(","))
        return cls(
            precision=precision,
            matmul_size=matmul_size,
            comm_bytes=comm_mib << 20 if comm_mib is not None and comm_mib > 0 else comm_mib,
            power_interval_s=power_interval_ms / 1e3 if power_interval_ms is not None else None,
            models=_names(models, lambda name: get_model(name).name),
            parallelisms=_names(parallelisms, str),
            recompute=recompute,
            fsdp_impl=None if impls == "deepspeed" else impls,
            allow_power_cap=allow_power_cap or None,
            emulate_world=None if emulate_world is None else check_world(emulate_world),
            link_gbps=None if link_gbps is None else check_link(link_gbps),
            # the default stand-in is left out, so plans from before the flag resume
            stand_in=_stand_in(stand_in, emulate_world),
            comm_ctas=None if comm_ctas is None else check_ctas(comm_ctas),
            colocate=None if colocate is None else check_world(colocate, "--colocate"),
            adaptive=adaptive or None,
            axes=axes or None,
        )

    def given(self) -> tuple[str, ...]:
        """The fields a run set (not left to their defaults)."""
        return tuple(f.name for f in dataclasses.fields(self) if getattr(self, f.name) is not None)

    def only(self, names) -> RunOptions:
        """These options with every field outside `names` back at its default."""
        return dataclasses.replace(self, **{n: None for n in self.given() if n not in names})

    def as_json(self) -> dict[str, Any]:
        """The set fields, tuples as lists: what plan.json and the ranks' job (core/rankjob.py) hold."""
        return {
            n: list(v) if isinstance(v, tuple) else v
            for n in self.given()
            for v in (getattr(self, n),)
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunOptions:
        known = {f.name for f in dataclasses.fields(cls)}
        if unknown := sorted(set(data) - known):
            raise bad_choice("run option", unknown[0], sorted(known))
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in data.items()})


def _stand_in(value, emulate_world) -> str | None:
    """--stand-in as a field: checked, and None for the default (copy)."""
    if value is None:
        return None
    check_stand_in(value)
    if emulate_world is None:
        raise ArtifactError("--stand-in chooses emulated traffic; it needs --emulate-world W")
    return None if value == "copy" else value


def flag_of(name: str) -> str:
    """The CLI flag of a RunOptions field."""
    return next(f.metadata["flag"] for f in dataclasses.fields(RunOptions) if f.name == name)


FIELDS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(RunOptions))
# argparse's attribute for each field's flag, as `from_flags` takes them (--comm-mib: comm_mib)
FLAG_DESTS: tuple[str, ...] = tuple(
    f.metadata["flag"].removeprefix("--").replace("-", "_") for f in dataclasses.fields(RunOptions)
)


def _names(text: str | None, canonical) -> tuple[str, ...] | None:
    """A comma-separated flag as a tuple (None when not given; empty names kept, so the
    check names them)."""
    if text is None:
        return None
    return tuple(canonical(n.strip()) for n in text.split(",") if n.strip())
