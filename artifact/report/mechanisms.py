"""The report's "What holds compute back on one GPU": the contention map's one-GPU
mechanism axis (artifact.core.mechanisms) as a table and a plot, and compare's
stand-in validation rows beside it. It reads the contention map's rows of summary.csv
(`summary` below), configs.json and verdicts.csv; it judges nothing.
"""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from artifact.core.mechanisms import VALIDATION_POINTS  # noqa: E402
from artifact.core.units import size  # noqa: E402
from artifact.judge.standin import ITEM, MIN_OVERLAP  # noqa: E402
from artifact.report.document import Doc  # noqa: E402
from artifact.report.plots import _save  # noqa: E402

AXIS_COMMS = ("spin", "nccl-shaped", "coloc")  # the mechanisms the heat map leaves out
WHAT = {
    "copy": "bytes only (copy engine, no SMs)",
    "onerank-avg": "NCCL's one-rank kernel",
    "spin": "SMs held, no bytes",
    "nccl-shaped": "NCCL-shaped stand-in",
    "coloc": "co-located NCCL ranks",
}


def own_section_configs(configs: dict) -> set[str]:
    """The contention rows the heat map leaves out: one GPU's mechanism axis (this
    section) and the order and mitigation axes (report.mitigation)."""
    return axis_configs(configs) | {
        c for c, cfg in configs.items() if cfg.get("axis", "base") != "base"
    }


def axis_configs(configs: dict) -> set[str]:
    return {
        c
        for c, cfg in configs.items()
        if cfg.get("comm") in AXIS_COMMS and cfg.get("axis", "base") == "base"
    }


def table(summary: pd.DataFrame, configs: dict) -> pd.DataFrame:
    """One row a configuration of the one-GPU mechanisms at the axis's size: what ran,
    its CTAs and ranks, Eq. 1 [95 % CI], its zero-byte control and the effect beyond it."""
    rows = summary[summary["mode"] == "derived"]
    room = _room_of(summary)
    axis = [c for c in axis_configs(configs)]
    if not axis:
        return pd.DataFrame()
    sizes = {configs[c]["comm_bytes"] for c in axis}
    keep = [
        c
        for c, cfg in configs.items()
        if cfg.get("comm") in (*AXIS_COMMS, "copy", "onerank-avg")
        and cfg.get("axis", "base") == "base"  # the order and mitigation axes: report.mitigation
        and cfg.get("comm_bytes") in sizes
        and cfg.get("compute") == "gemm"
    ]
    out = []
    for c in keep:
        cfg, mine = configs[c], rows[rows["config_id"] == c].set_index("metric")

        def get(metric, col, mine=mine):
            return mine.loc[metric, col] if metric in mine.index else float("nan")

        twin = bool(cfg.get("twin_of"))
        out.append(
            {
                "config_id": c,
                "mechanism": WHAT.get(cfg["comm"], cfg["comm"])
                + (" (twin of co-located)" if twin else ""),
                "compute": cfg["model"],
                "communication": size(cfg["comm_bytes"]),
                "ctas": cfg.get("ctas") or 0,
                "ranks": cfg.get("ranks") or "",
                "n": get("slowdown", "n"),
                "slowdown": get("slowdown", "mean"),
                "lo": get("slowdown", "ci_low"),
                "hi": get("slowdown", "ci_high"),
                "control": get("control_slowdown", "mean"),
                "control_lo": get("control_slowdown", "ci_low"),
                "control_hi": get("control_slowdown", "ci_high"),
                "beyond": get("slowdown_beyond_control", "mean"),
                "vs_nocomm": get("slowdown_vs_nocomm", "mean"),
                "vs_nocomm_lo": get("slowdown_vs_nocomm", "ci_low"),
                "vs_nocomm_hi": get("slowdown_vs_nocomm", "ci_high"),
                "comm": cfg["comm"],
                "twin": twin,
                **{"room_alone": math.nan, "room_beside": math.nan, **room.get(c, {})},
            }
        )
    order = {c: k for k, c in enumerate(("copy", "onerank-avg", "spin", "nccl-shaped", "coloc"))}
    t = pd.DataFrame(out)
    t["_order"] = t["comm"].map(order)
    t["_ranks"] = pd.to_numeric(t["ranks"], errors="coerce").fillna(0)
    return t.sort_values(["compute", "_order", "_ranks", "twin", "ctas"]).drop(
        columns=["_order", "_ranks"]
    )


def _room_of(summary: pd.DataFrame) -> dict[str, dict[str, float]]:
    """config_id -> the GEMM's CTAs an SM holds alone and beside one holder CTA
    (measure.occupancy, the overlap mode's readings)."""
    hit = summary[
        (summary["mode"] == "overlap")
        & summary["metric"].isin(["compute_ctas_per_sm", "compute_ctas_beside_comm"])
    ]
    out: dict[str, dict[str, float]] = {}
    for r in hit.itertuples():
        key = "room_alone" if r.metric == "compute_ctas_per_sm" else "room_beside"
        out.setdefault(r.config_id, {})[key] = float(r.mean)
    return out


def _room(beside, alone) -> str:
    return "-" if pd.isna(beside) or pd.isna(alone) else f"{beside:.0f} ({alone:.0f})"


def room_finding(t: pd.DataFrame) -> str | None:
    """Whether the holders leave the GEMM the room an SM that NCCL's CTA leaves it (the
    occupancy rules on the recorded footprints): the stand-in stands for NCCL only where
    they do."""
    known = t.dropna(subset=["room_beside"])
    nccl = known[known["comm"] == "coloc"]
    if nccl.empty:
        return None
    ref = nccl["room_beside"].max()
    alone = known["room_alone"].max()
    names = {"nccl-shaped": "the NCCL-shaped stand-in", "spin": "the SMs-held kernel"}
    held = {names[c]: g["room_beside"].max() for c, g in known.groupby("comm") if c in names}
    if not held:
        return None
    same = [n for n, v in held.items() if v == ref]
    more = [f"{n} ({v:.0f})" for n, v in held.items() if v > ref]
    text = (
        f"By the profiler's launch records and the SM's limits, the GEMM's kernel fits "
        f"{alone:.0f} CTA(s) on an SM alone and {ref:.0f} beside one CTA of co-located NCCL. "
    )
    if same and not more:
        return text + (
            f"Beside {' and '.join(same)} it fits the same: they leave the GEMM the room "
            "NCCL's CTAs leave it."
        )
    return text + (
        f"Beside {', '.join(more)} it fits more: those holders share SMs NCCL's CTAs would "
        "hold, so their slowdowns understate NCCL's on this GPU."
    )


def _pct(x) -> str:
    return "-" if pd.isna(x) else f"{100 * x:+.1f} %"


def _ci(lo, hi, scale=100.0, fmt="{:+.1f}") -> str:
    """A CI as text, in points by default (`scale`, `fmt`: another unit)."""
    return "-" if pd.isna(lo) else f"[{fmt.format(scale * lo)}, {fmt.format(scale * hi)}]"


def figure(t: pd.DataFrame, out_dir: Path) -> Path | None:
    """Eq. 1 against SMs held (no bytes), with the bytes-only copy at 0 CTAs and the stand-in
    and co-located NCCL at their CTAs beside it; error bars are the 95 % CIs."""
    if t.empty or t["slowdown"].isna().all():
        return None
    fig, axes = plt.subplots(
        1, t["compute"].nunique(), figsize=(6.5 * t["compute"].nunique(), 3.8), squeeze=False
    )
    marks = {
        "spin": ("o-", "SMs held, no bytes"),
        "copy": ("s", "bytes only (copy engine)"),
        "nccl-shaped": ("^", "NCCL-shaped stand-in"),
        "coloc": ("D", "co-located NCCL"),
        "onerank-avg": ("v", "NCCL one-rank kernel"),
    }
    for ax, (compute, part) in zip(axes[0], t.groupby("compute"), strict=True):
        for comm, (style, name) in marks.items():
            for twin in (False, True):
                p = part[(part["comm"] == comm) & (part["twin"] == twin)].sort_values("ctas")
                if p.empty:
                    continue
                err = [100 * (p["slowdown"] - p["lo"]), 100 * (p["hi"] - p["slowdown"])]
                label = (
                    name
                    + (" (twin)" if twin else "")
                    + ("" if comm != "coloc" else f" (W = {', '.join(str(r) for r in p['ranks'])})")
                )
                ax.errorbar(
                    p["ctas"],
                    100 * p["slowdown"],
                    yerr=err,
                    fmt=style,
                    capsize=3,
                    label=label,
                    mfc="none" if twin else None,
                )
        ax.axhline(0, color="grey", lw=0.8)
        ax.set_xlabel("CTAs held by the communication kernel(s)")
        ax.set_ylabel("matmul slowdown, Eq. 1 (%)")
        ax.set_title(f"{compute} beside {part['communication'].iloc[0]}")
        ax.legend(fontsize=7)
    return _save(fig, out_dir, "mechanisms")


INTRODUCTION = (
    "On one GPU a collective moves no data, so what a real collective does to the "
    "compute beside it is taken apart here, at the paper's 1 GiB: a kernel that holds "
    "C SMs (streaming multiprocessors) and moves no bytes; a copy-engine copy that moves "
    "bytes and holds no SM; the NCCL-shaped stand-in that --emulate-world can use (C "
    "persistent CTAs moving rank 0's ring bytes, paced to the link); and real NCCL ranks "
    "co-located on the GPU, each beside the stand-in's twin (the same total CTAs and "
    "bytes, paced to NCCL's own time a collective). Each slowdown is Eq. 1 with its 95 % "
    "CI, beside its zero-byte, zero-CTA control. The stand-in counts as validated on a "
    f"GPU model where its twin's slowdown is within {VALIDATION_POINTS:g} points of "
    "co-located NCCL's (the whole CI of the difference), and gets no verdict where "
    f"co-located NCCL overlapped the compute for under {100 * MIN_OVERLAP:.0f} % of its "
    "time (then the two did not run side by side)."
)
VS_NOCOMM = (
    "'vs nocomm' is the same slowdown against the compute with no communication at all; "
    "where it and Eq. 1 differ, V1 (below) fails: the sequential baseline itself ran at "
    "another speed than the compute alone."
)


TABLE_HEADER = [
    "mechanism",
    "compute",
    "communication",
    "CTAs",
    "ranks",
    "n",
    "Eq. 1 slowdown",
    "95% CI",
    "zero-byte control",
    "95% CI",
    "beyond control",
    "vs nocomm",
    "95% CI",
    "GEMM CTAs an SM beside one holder CTA (alone)",
]


def _table_rows(t: pd.DataFrame) -> list[list]:
    """The section's table: one row a configuration of `table`."""
    return [
        [
            r.mechanism,
            r.compute,
            r.communication,
            r.ctas,
            r.ranks,
            "-" if pd.isna(r.n) else int(r.n),
            _pct(r.slowdown),
            _ci(r.lo, r.hi),
            _pct(r.control),
            _ci(r.control_lo, r.control_hi),
            _pct(r.beyond),
            _pct(r.vs_nocomm),
            _ci(r.vs_nocomm_lo, r.vs_nocomm_hi),
            _room(r.room_beside, r.room_alone),
        ]
        for r in t.itertuples()
    ]


def _stand_in_checks(doc: Doc, verdicts: pd.DataFrame | None) -> None:
    """compare's stand-in validation rows, where there are any."""
    checks = (
        verdicts[verdicts["item"] == ITEM]
        if verdicts is not None and "item" in verdicts
        else pd.DataFrame()
    )
    if not checks.empty:
        doc.table(
            ["validation", "verdict", "detail"],
            [[r.config_id, r.verdict, r.reason] for r in checks.itertuples()],
        )


def section(
    doc: Doc,
    summary: pd.DataFrame,
    configs: dict,
    verdicts: pd.DataFrame | None,
    fig_dir: Path,
    measured_on_gpu: bool,
) -> list[Path]:
    """The section from the contention map's rows (`summary`): its prose, plot and table,
    then the stand-in's validation rows; returns the image files it made."""
    doc.p(INTRODUCTION)
    if not measured_on_gpu:
        doc.p(
            "Nothing of this section was measured here: it needs one NVIDIA GPU, and this "
            "run was on a CPU (the contention map ran gloo's all-reduce only)."
        )
        return []
    t = table(summary, configs)
    if t.empty:
        doc.p(
            "Nothing of this section was measured in this run: it runs on one GPU only "
            "(with several GPUs the contention map limits NCCL's own CTAs instead)."
        )
        return []
    png = figure(t, fig_dir)
    if png is not None:
        doc.image(
            f"figures/{png.name}", "What holds compute back on one GPU: Eq. 1 against CTAs held"
        )
    doc.table(TABLE_HEADER, _table_rows(t))
    if sentence := room_finding(t):
        doc.p(sentence)
    doc.p(VS_NOCOMM)
    _stand_in_checks(doc, verdicts)
    return [png, png.with_suffix(".pdf")] if png is not None else []
