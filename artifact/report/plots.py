"""One matplotlib figure a paper figure, with 95 % CI error bars (PNG and PDF).

Figures speak the paper's language: the title names the paper's figure, the GPU and
the repetitions; bars are labelled by model / parallelism / precision / micro-batch
(what differs between them; what they share goes into the title); ratios are in %.
"""

from __future__ import annotations

import os
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # headless: CI and GPU machines have no display
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.colors import CenteredNorm  # noqa: E402

from artifact.core.units import size  # noqa: E402
from artifact.figures import FigureSpec, spec_of  # noqa: E402

# The paper's one Fig. 8 point (a 1 GiB all-reduce beside a matmul; FP16, the paper's
# main precision), boxed on the contention map.
PAPER_FIG8_POINT = {"comm_bytes": 1 << 30, "compute": "gemm-fp16"}
STATE_COLORS = {
    "overlap": "tab:red",
    "compute_only": "tab:blue",
    "comm_only": "tab:green",
    "idle": "tab:gray",
}
FAMILIES = {"gpt3": "GPT-3", "llama2": "LLaMA-2", "gpt": "GPT", "llama": "LLaMA"}
# FSDP rows name their implementation (records from before the choice existed: "FSDP")
FSDP_IMPL_LABELS = {"deepspeed": "FSDP (ZeRO-3)", "fsdp2": "FSDP2 (torch)"}
PARALLELISMS = {
    "fsdp": "FSDP",
    "pipeline": "pipeline",
    "allreduce": "all-reduce",
    "proxy-copy": "copy proxy",
    "proxy-nccl-onerank": "NCCL one-rank proxy",
}


def model_name(model: str) -> str:
    """'gpt3-1.3b' -> 'GPT-3 1.3B', 'llama2-13b' -> 'LLaMA-2 13B', 'matmul-8192' -> '8192³ matmul'."""
    family, _, size = str(model).partition("-")
    if family == "matmul":
        return f"{size}³ matmul"
    if family not in FAMILIES:
        return str(model)
    return f"{FAMILIES[family]} {size.upper() if size.endswith('b') else size}"


def config_fields(config: dict) -> dict[str, str]:
    """A configuration's readable parts: model, parallelism, precision, micro-batch, ..."""
    parallelism = config.get("parallelism")
    fields = {
        "model": model_name(config.get("model", "?")),
        "parallelism": FSDP_IMPL_LABELS.get(config.get("fsdp_impl"))
        or PARALLELISMS.get(parallelism, parallelism),
        "precision": str(config.get("precision", "")).upper(),
    }
    if config.get("micro_batch") is not None:
        fields["mb"] = f"mb {config['micro_batch']}"
    if config.get("comm_bytes"):
        fields["comm"] = size(config["comm_bytes"])
    if "power_cap_w" in config:
        cap = config["power_cap_w"]
        fields["cap"] = "no cap" if cap is None else f"cap {cap:g} W"
    return {k: v for k, v in fields.items() if v}


def config_labels(config_ids: list[str], configs: dict) -> tuple[list[str], str]:
    """(one label per configuration: the parts that differ between them, what they share)."""
    fields = [config_fields(configs.get(c, {"model": c})) for c in config_ids]
    keys = list(dict.fromkeys(k for f in fields for k in f))
    shared = [k for k in keys if len({f.get(k) for f in fields}) == 1]
    labels = ["\n".join(f[k] for k in keys if k in f and k not in shared) for f in fields]
    if len(config_ids) == 1 or not any(labels):
        labels = [" ".join(f[k] for k in keys if k in f) for f in fields]
    return labels, ", ".join(fields[0][k] for k in shared if k in fields[0])


def hardware(rows: pd.DataFrame, configs: dict, with_n: bool = True) -> str:
    """'1 x NVIDIA H200, n = 5' for the rows drawn (the records' device name); an emulated
    world ran on one device: '1 x NVIDIA H100 as rank 0 of 4 (emulated), n = 5'."""
    gpus = sorted({str(g) for g in rows["gpu"].dropna()})
    used = [configs.get(c, {}) for c in rows["config_id"]]
    world = max((c.get("world_size", 1) for c in used), default=1)
    emulated = max((c.get("emulated_world") or 0 for c in used), default=0)
    where = "CPU (gloo)" if gpus in ([], ["cpu"]) else ", ".join(g for g in gpus if g != "cpu")
    n = rows["n"].dropna().astype(int)
    reps = f", n = {n.min()}" + ("" if n.min() == n.max() else f"-{n.max()}")
    reps = reps if with_n and not n.empty else ""
    if emulated:
        return f"1 x {where} as rank 0 of {emulated} (emulated){reps}"
    return f"{world} x {where}{reps}"


def _save(fig, out_dir: Path, name: str) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    png = out_dir / f"{name}.png"
    try:
        # no creation date in the PDF: the same run's report redrawn is the same file
        pdf = (out_dir / f"{name}.pdf", {"metadata": {"CreationDate": None}})
        for path, opts in ((png, {"dpi": 110}), pdf):
            # temporary name, then rename: a kill never leaves a truncated figure behind
            tmp = path.with_name(f".{path.name}.tmp")
            try:
                fig.savefig(tmp, format=path.suffix[1:], bbox_inches="tight", **opts)
                os.replace(tmp, path)
            finally:
                tmp.unlink(missing_ok=True)
    finally:
        plt.close(fig)
    return png


def _bars(
    ax, rows: pd.DataFrame, configs: list[str], series: list, scale: float, flagged=frozenset()
) -> None:
    """Grouped bars, one group per configuration, with their 95 % CIs; a derived bar of a
    `flagged` configuration (its passes disagree: Eq. 4 unreliable) is hatched."""
    width = 0.8 / len(series)
    x = np.arange(len(configs))
    for i, (mode, metric, label) in enumerate(series):
        sel = (
            rows[(rows["mode"] == mode) & (rows["metric"] == metric)]
            .set_index("config_id")
            .reindex(configs)
        )
        mean = scale * sel["mean"].to_numpy(float)
        low, high = scale * sel["ci_low"].to_numpy(float), scale * sel["ci_high"].to_numpy(float)
        err = np.nan_to_num(np.vstack([mean - low, high - mean]))
        offset = (i - (len(series) - 1) / 2) * width
        bars = ax.bar(x + offset, mean, width, yerr=err, capsize=3, label=label)
        if mode == "derived":
            for bar, config in zip(bars, configs, strict=True):
                if config in flagged:
                    bar.set_hatch("xx")
                    bar.set_edgecolor("red")
    ax.axhline(0, color="black", lw=0.6)


def _bands(ax, bands: list[tuple], metrics: set[str], scale: float) -> None:
    """The paper's numbers evaluated here: (label, low, high, metric), on the panel of their metric."""
    for label, lo, hi, metric in bands:
        if metric in metrics:
            ax.axhspan(scale * lo, scale * hi, color="gold", alpha=0.3, label=f"paper: {label}")


def draws_eq4_ideal(spec: FigureSpec) -> bool:
    """Whether a panel of the figure plots Eq. 4's ideal (derived e2e_ideal_ms): its bars are
    hatched where the timed and profiled passes disagree (validations.unreliable_eq4)."""
    return any(s.metric == "e2e_ideal_ms" for p in spec.panels for s in p.series)


def _bar_order(config_id: str) -> tuple[str, bool]:
    """Configurations in id order, a point's FSDP2 bar right after its ZeRO-3 one."""
    return config_id.replace("_fsdp2_", "_fsdp_"), "_fsdp2_" in config_id


def bar_figure(
    figure: str,
    summary: pd.DataFrame,
    out_dir: Path,
    bands: list[tuple[str, float, float, str]],
    configs: dict | None = None,
    flagged: frozenset[str] = frozenset(),
) -> Path | None:
    """Grouped bars over configurations (and fig10's power panel); `bands` are the paper's
    evaluated numbers as (label, low, high, metric) in the metric's own unit; derived bars
    of the `flagged` configurations are hatched (their timed and profiled passes disagree)."""
    spec, configs = spec_of(figure), configs or {}
    rows = summary[summary["figure"] == spec.records]
    first, *more = spec.panels
    drawn = {s.metric for s in first.series}
    ids = sorted(set(rows.loc[rows["metric"].isin(drawn), "config_id"]), key=_bar_order)
    if not ids:
        return None
    # a further panel only where its metrics were measured (fig10's power: telemetry)
    shown = [first, *(p for p in more if rows["metric"].isin({s.metric for s in p.series}).any())]
    panels = [
        ([(s.mode, s.metric, s.label) for s in p.series], p.y_label, 100.0 if p.percent else 1.0)
        for p in shown
    ]
    labels, shared = config_labels(ids, configs)
    width = max(6.0, 1.3 * len(ids) + 2)
    fig, axes = plt.subplots(
        1,
        len(panels),
        figsize=(width * len(panels) ** 0.5, 4.4),
        squeeze=False,
        layout="constrained",
    )
    for ax, (panel_series, panel_ylabel, scale) in zip(axes[0], panels, strict=True):
        _bars(ax, rows, ids, panel_series, scale, flagged)
        _bands(ax, bands, {m for _, m, _ in panel_series}, scale)
        ax.set_xticks(np.arange(len(ids)), labels, fontsize=8)
        ax.set_ylabel(panel_ylabel)
        handles = len(ax.get_legend_handles_labels()[0])
        ax.legend(fontsize=7, loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=min(handles, 3))
    used = rows[rows["metric"].isin(drawn) & rows["config_id"].isin(ids)]
    title = spec.title
    fig.suptitle(f"{title}\n{hardware(used, configs)}; {shared}".rstrip("; "), fontsize=10)
    note = "error bars: 95% CI over repetitions"
    if flagged & set(ids):
        note += "; hatched red: derived from passes that disagree (timed vs profiled), unreliable"
    fig.supxlabel(note, fontsize=7)
    return _save(fig, out_dir, figure)


def power_trace_figure(
    figure: str, traces: list[Path], out_dir: Path, configs: dict | None = None, where: str = ""
) -> Path | None:
    """`figure`'s power traces (FigureSpec.power_trace): power (% TDP) over normalised time,
    coloured by kernel-timeline state."""
    if not traces:
        return None
    configs = configs or {}
    fig, axes = plt.subplots(
        len(traces), 1, figsize=(8, 2.4 * len(traces)), squeeze=False, layout="constrained"
    )
    for ax, path in zip(axes[:, 0], traces, strict=True):
        df = pd.read_csv(path)
        ax.plot(df["t_norm"], df["power_pct_tdp"], color="black", lw=0.8)
        for state, color in STATE_COLORS.items():
            sel = df[df["state"] == state]
            label = state.replace("_", " ")
            ax.scatter(sel["t_norm"], sel["power_pct_tdp"], s=6, color=color, label=label)
        cid = path.stem.removesuffix("-power")
        ax.set_title(" ".join(config_fields(configs.get(cid, {"model": cid})).values()), fontsize=8)
        ax.set_ylabel("% of TDP")
        ax.legend(fontsize=6, ncol=4)
    axes[-1, 0].set_xlabel("time (normalised to the sampled window)")
    title = spec_of(figure).title
    fig.suptitle(f"{title}\n{where}; repetition 0 (its power samples)", fontsize=10)
    return _save(fig, out_dir, figure)


def contention_grid(
    rows: pd.DataFrame, configs: dict[str, dict], metric: str, column: str = "mean"
) -> dict[str, pd.DataFrame]:
    """mechanism -> compute kind (rows, by arithmetic intensity) x communication MiB (columns),
    from the contention map's summary rows."""
    rows = rows[(rows["mode"] == "derived") & (rows["metric"] == metric)].copy()
    if rows.empty:
        return {}
    rows["mib"] = [configs[c]["comm_bytes"] / (1 << 20) for c in rows["config_id"]]
    rows["intensity"] = [configs[c]["intensity_flop_per_byte"] for c in rows["config_id"]]
    order = rows.groupby("model")["intensity"].first().sort_values().index
    return {
        mech: part.pivot_table(index="model", columns="mib", values=column).reindex(order)
        for mech, part in rows.groupby("parallelism")
    }


def _heat_panel(
    ax, grid: pd.DataFrame, half: pd.DataFrame | None, norm: CenteredNorm, paper_point: dict
):
    """One mechanism's heat map, in %, each cell's CI half-width under its mean, and the
    paper's Fig. 8 point boxed where the sweep has it; (image, whether it was boxed)."""
    values = 100 * grid.to_numpy(float)
    spread = None if half is None else 100 * half.reindex_like(grid).to_numpy(float)
    image = ax.imshow(values, cmap="RdBu_r", norm=norm)
    for (i, j), v in np.ndenumerate(values):
        dark = not np.isnan(v) and abs(v) > 0.6 * norm.halfrange
        text = "-" if np.isnan(v) else f"{v:.0f}"
        if spread is not None and not np.isnan(v) and not np.isnan(spread[i, j]):
            text += f"\n±{spread[i, j]:.0f}"
        ax.text(
            j, i, text, ha="center", va="center", fontsize=7, color="white" if dark else "black"
        )
    ax.set_xticks(range(grid.shape[1]), [f"{m:g}" for m in grid.columns], fontsize=7)
    ax.set_yticks(range(grid.shape[0]), list(grid.index), fontsize=7)
    ax.set_xlabel("communication size (MiB)", fontsize=7)
    mib = paper_point["comm_bytes"] / (1 << 20)
    if paper_point["compute"] in grid.index and mib in grid.columns:
        i, j = list(grid.index).index(paper_point["compute"]), list(grid.columns).index(mib)
        box = plt.Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, lw=2, edgecolor="black")
        ax.add_patch(box)
        return image, True
    return image, False


# the contention map's rows of heat maps: (metric, what it is)
HEAT_ROWS = (
    ("slowdown", "compute slowdown (Eq. 1)"),
    ("comm_slowdown", "communication slowdown"),
)


def _half_widths(rows: pd.DataFrame, configs: dict, grids: dict) -> dict:
    """metric -> mechanism -> each cell's 95% CI half-width (mean - ci_low)."""
    return {
        metric: {
            m: (g - lo)
            for (m, g), lo in zip(
                grids[metric].items(),
                contention_grid(rows, configs, metric, "ci_low").values(),
                strict=True,
            )
        }
        for metric, _ in HEAT_ROWS
    }


def _heat_row(fig, axes, r: int, grids: dict, halves: dict, mechs: list, paper_point: dict):
    """Row `r` of heat maps (one quantity, one colour scale centred on 0, one colour bar);
    whether the paper's point was boxed in it."""
    metric, title = HEAT_ROWS[r]
    found = [100 * g.to_numpy(float) for g in grids[metric].values()]
    peak = max([5.0] + [float(np.nanmax(np.abs(v))) for v in found if np.isfinite(v).any()])
    norm = CenteredNorm(vcenter=0.0, halfrange=peak)
    image, boxed = None, False
    for c, mech in enumerate(mechs):
        ax, grid = axes[r, c], grids[metric].get(mech)
        if grid is None:
            ax.set_axis_off()
            continue
        image, hit = _heat_panel(ax, grid, halves[metric].get(mech), norm, paper_point)
        boxed |= hit
        ax.set_title(f"{PARALLELISMS.get(mech, mech)}: {title} (%)", fontsize=8)
    if image is not None:
        fig.colorbar(image, ax=list(axes[r]), fraction=0.03, label=f"{title} (%)")
    return boxed


def contention_figure(
    figure: str,
    summary: pd.DataFrame,
    configs: dict[str, dict],
    out_dir: Path,
    paper_point: dict,
) -> tuple[Path | None, bool]:
    """`figure`'s heat maps of compute and communication slowdown over communication size x
    compute kind, one column per mechanism, each cell its mean and the half-width of its
    95% CI. Diverging colours centred on 0 (a speed-up is blue, not clipped), one scale per
    quantity (a row shares its colour bar). Returns the file and whether the paper's
    Fig. 8 point was in the sweep, and so boxed."""
    rows = summary[summary["figure"] == figure]
    grids = {metric: contention_grid(rows, configs, metric) for metric, _ in HEAT_ROWS}
    mechs = sorted(grids["slowdown"])
    if not mechs:
        return None, False
    halves = _half_widths(rows, configs, grids)
    fig, axes = plt.subplots(
        len(HEAT_ROWS),
        len(mechs),
        figsize=(4.6 * len(mechs) + 1, 3.4 * len(HEAT_ROWS)),
        squeeze=False,
        layout="constrained",
    )
    boxed = False
    for r in range(len(HEAT_ROWS)):
        boxed |= _heat_row(fig, axes, r, grids, halves, mechs, paper_point)
    boxed_note = (
        "boxed: the paper's Fig. 8 point"
        if boxed
        else "the paper's Fig. 8 point is not in this sweep"
    )
    fig.suptitle(
        f"{spec_of(figure).title}: {hardware(rows, configs)}\n"
        f"rows: compute kinds by arithmetic intensity, low to high; cells: mean and ± half of its 95% CI; {boxed_note}",
        fontsize=9,
    )
    return _save(fig, out_dir, figure), boxed
