"""The report's "What frees the compute": the contention map's order and mitigation axes
(artifact.core.mechanisms) as a table, one plot and the sentences the numbers allow. It
reads the contention map's rows of summary.csv (`summary` below) and configs.json; it
judges nothing.

For each knob: the compute's slowdown beside the collective (Eq. 1, and against the
compute alone) and the collective's own time beside the compute: what the compute gains,
the communication pays. Each row also shows the kernels' footprints from the profiler
(the GEMM's grid against the GPU's SMs: one wave or several) and which kernel of a
side-by-side pair started first.
"""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from artifact.report.document import Doc  # noqa: E402
from artifact.report.mechanisms import _ci, _pct  # noqa: E402
from artifact.report.plots import _save  # noqa: E402

# a knob "removes most of the slowdown" where its whole CI lies below this share of the
# default's mean, "at small cost" where its collective takes at most this much longer
MOST = 0.5
SMALL_COST = 1.25
FOOTPRINT = ("grid_ctas", "threads_per_cta", "regs_per_thread", "smem_per_cta_bytes")


def rows(summary: pd.DataFrame, configs: dict) -> pd.DataFrame:
    """One row a configuration of the order and mitigation axes, with its numbers."""
    mine = [c for c, g in configs.items() if g.get("axis") in ("order", "mitigation")]
    if not mine:
        return pd.DataFrame()
    s = summary[summary["config_id"].isin(mine)]
    out = []
    for c in mine:
        g, part = configs[c], s[s["config_id"] == c]

        def get(mode, metric, col="mean", part=part):
            hit = part[(part["mode"] == mode) & (part["metric"] == metric)]
            return float(hit[col].iloc[0]) if len(hit) else float("nan")

        out.append(
            {
                "config_id": c,
                "axis": g["axis"],
                "knob": g.get("knob") or g.get("order", ""),
                "mechanism": g.get("note", ""),
                "comm": g["comm"],
                "ranks": g.get("ranks") or g.get("world_size"),
                "order": g.get("order", "holder-first"),
                "n": get("derived", "slowdown", "n"),
                **{
                    f"{name}{suffix}": get("derived", metric, col)
                    for name, metric in (
                        ("slowdown", "slowdown"),
                        ("vs_nocomm", "slowdown_vs_nocomm"),
                    )
                    for suffix, col in (("", "mean"), ("_lo", "ci_low"), ("_hi", "ci_high"))
                },
                **{
                    f"comm_ms{suffix}": get("overlap", "communication_ms", col)
                    for suffix, col in (("", "mean"), ("_lo", "ci_low"), ("_hi", "ci_high"))
                },
                "comm_alone_ms": get("comm_alone", "communication_ms"),
                "holder_first": get("overlap", "holder_first_fraction"),
                "gpu_sms": get("overlap", "gpu_sms"),
                **{f"compute_{f}": get("overlap", f"compute_{f}") for f in FOOTPRINT},
                **{f"comm_{f}": get("overlap", f"comm_{f}") for f in FOOTPRINT},
            }
        )
    t = pd.DataFrame(out)
    t["_first"] = t["knob"] != "default"  # NCCL's defaults first: each knob reads against it
    return t.sort_values(["axis", "ranks", "_first", "config_id"], ignore_index=True).drop(
        columns="_first"
    )


def _ms(x) -> str:
    return "-" if pd.isna(x) else f"{x:.2f}"


def _footprint(r, who: str) -> str:
    grid = getattr(r, f"{who}_grid_ctas")
    if pd.isna(grid):
        return "-"
    smem = getattr(r, f"{who}_smem_per_cta_bytes")
    if pd.isna(smem):  # a grid without its launch record's other fields
        return f"{grid:.0f} CTAs"
    return (
        f"{grid:.0f} x {getattr(r, f'{who}_threads_per_cta'):.0f} thr, "
        f"{getattr(r, f'{who}_regs_per_thread'):.0f} reg, {smem / 1024:.0f} KiB"
    )


def emulated_by(r) -> str:
    """The stand-in flags that emulate a row's collective (`run --emulate-world W ...`):
    the NCCL-shaped stand-in on the CTAs a rank's collective kernel ran (its recorded grid),
    or the copy stand-in where the collective ran no CTA (the zero policy's copy engines)."""
    grid = r.comm_grid_ctas
    if pd.isna(grid):
        return "-"
    return "--stand-in copy" if grid == 0 else f"--stand-in nccl-shaped --comm-ctas {grid:.0f}"


def findings(t: pd.DataFrame) -> list[str]:
    """The sentences the numbers allow: a knob that removes most of the slowdown at small
    cost to the collective, and whether the GEMM ran in one wave (wave quantization's
    precondition), from the recorded grids."""
    out = []
    mit = t[t["axis"] == "mitigation"]
    for ranks, part in mit.groupby("ranks"):
        base = part[part["knob"] == "default"]
        if base.empty or pd.isna(base["slowdown"].iloc[0]):
            continue
        s0, c0 = base["slowdown"].iloc[0], base["comm_ms"].iloc[0]
        if s0 <= 0:
            out.append(
                f"At W = {ranks}, NCCL's defaults slowed the compute by {_pct(s0)}: nothing to free."
            )
            continue
        for r in part[part["knob"] != "default"].itertuples():
            if r.n >= 2 and r.slowdown_hi < MOST * s0 and r.comm_ms <= SMALL_COST * c0:
                out.append(
                    f"At W = {ranks}, {r.mechanism.split(', ')[-1]} removes most of the slowdown "
                    f"({_pct(r.slowdown)} {_ci(r.slowdown_lo, r.slowdown_hi)} against "
                    f"{_pct(s0)} at NCCL's defaults) while the collective takes "
                    f"{r.comm_ms / c0:.2f}x its time at the defaults."
                )
        if not any(f"At W = {ranks}," in x for x in out):
            out.append(
                f"At W = {ranks}, no knob removed most of the slowdown ({_pct(s0)} at NCCL's "
                f"defaults) without the collective taking over {SMALL_COST:.2f}x its time."
            )
    grids = t.dropna(subset=["compute_grid_ctas", "gpu_sms"])
    if not grids.empty:
        grid, sms = grids["compute_grid_ctas"].max(), grids["gpu_sms"].iloc[0]
        waves = math.ceil(grid / sms)
        out.append(
            f"The GEMM's kernel ran {grid:.0f} CTAs on {sms:.0f} SMs: "
            + (
                "one wave (persistent), so a holder that starts first can push it into a second "
                "wave (wave quantization)."
                if waves == 1
                else f"{waves} waves, not a persistent grid, so SMs held by a collective cost it "
                "about their share of the SMs, not a whole extra wave: no wave quantization."
            )
        )
    return out


def figure(t: pd.DataFrame, out_dir: Path) -> Path | None:
    """The compute's slowdown against the collective's time beside it, a point a knob."""
    mit = t[(t["axis"] == "mitigation")].dropna(subset=["slowdown", "comm_ms"])
    if mit.empty:
        return None
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for ranks, part in mit.groupby("ranks"):
        ax.errorbar(
            part["comm_ms"],
            100 * part["slowdown"],
            xerr=[part["comm_ms"] - part["comm_ms_lo"], part["comm_ms_hi"] - part["comm_ms"]],
            yerr=[
                100 * (part["slowdown"] - part["slowdown_lo"]),
                100 * (part["slowdown_hi"] - part["slowdown"]),
            ],
            fmt="o",
            capsize=3,
            label=f"W = {ranks}",
        )
        for r in part.itertuples():
            ax.annotate(
                r.knob,
                (r.comm_ms, 100 * r.slowdown),
                fontsize=7,
                xytext=(3, 3),
                textcoords="offset points",
            )
    ax.axhline(0, color="grey", lw=0.8)
    ax.set_xlabel("collective's time beside the compute (ms an iteration)")
    ax.set_ylabel("compute slowdown, Eq. 1 (%)")
    ax.set_title("What frees the compute: each knob's trade")
    ax.legend(fontsize=8)
    return _save(fig, out_dir, "mitigation")


def _cells(r) -> list:
    """One table row's cells."""
    return [
        r.axis,
        r.knob if r.axis == "mitigation" else r.config_id.split("_")[1],
        r.ranks,
        "-" if pd.isna(r.n) else int(r.n),
        _pct(r.slowdown),
        _ci(r.slowdown_lo, r.slowdown_hi),
        _pct(r.vs_nocomm),
        _ms(r.comm_ms),
        _ci(r.comm_ms_lo, r.comm_ms_hi, 1.0, "{:.2f}"),
        "-" if pd.isna(r.holder_first) else f"{r.holder_first:.2f}",
        _footprint(r, "compute"),
        _footprint(r, "comm"),
        emulated_by(r),
    ]


def section(doc: Doc, summary: pd.DataFrame, configs: dict, fig_dir: Path) -> list[Path]:
    t = rows(summary, configs)
    doc.p(
        "What a user can turn to free the compute, each knob beside NCCL's defaults on the "
        "same collective and GEMM at the map's one size: NCCL's CTA policy (efficiency, zero), "
        "NCCL's max_ctas (4, 8, 16), and torch's SM carve-out for the matmuls equal to NCCL's "
        "CTAs; the copy engine's row is in the section above. Co-located ranks (one GPU) keep "
        "their CTAs capped at NCCL's channel count in all, min = max, since every rank's "
        "kernel must be resident at once (at NCCL's own defaults 4 ranks hung in set-up on "
        "one H100); there the caps are totals. The order axis queues each collective after "
        "the compute it overlaps (compute-first) instead of before it. Slowdowns are Eq. 1 "
        "with 95 % CIs; the collective's time is its kernels' time an iteration beside the "
        "compute; 'holder first' is the share of side-by-side kernel pairs whose collective "
        "started first, as the trace shows."
    )
    if t.empty:
        doc.p(
            "Not run here: the order and mitigation axes run on a GPU, at presets review and "
            "paper, or with `run contention --axes order,mitigation`."
        )
        return []
    png = figure(t, fig_dir)
    if png is not None:
        doc.image(
            f"figures/{png.name}", "What frees the compute: slowdown against the collective's time"
        )
    head = "axis,row,W,n,Eq. 1 slowdown,95% CI,vs nocomm,collective ms,95% CI,holder first"
    doc.table(
        [*head.split(","), "GEMM kernel", "collective kernel", "emulated by"],
        [_cells(r) for r in t.itertuples()],
    )
    doc.p(
        "'emulated by': the flags with which `run --emulate-world W` previews a row's "
        "collective on one GPU: the NCCL-shaped stand-in on the CTAs a rank's collective "
        "kernel ran, or the copy stand-in where it ran none (the zero policy's copy engines)."
    )
    for sentence in findings(t):
        doc.p(sentence)
    return [png, png.with_suffix(".pdf")] if png is not None else []
