"""One matplotlib figure a paper figure, with 95 % CI error bars (PNG and PDF)."""

from __future__ import annotations

import os
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # headless: CI and GPU machines have no display
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

# figure -> (records figure, [(mode, metric, legend label)], y label)
SERIES = {
    "fig4": ("fig4", [("derived", "slowdown", "compute slowdown (Eq. 1)")], "slowdown (ratio)"),
    "fig5": (
        "fig4",
        [
            ("overlap", "e2e_ms", "overlapped"),
            ("sequential", "e2e_ms", "sequential"),
            ("derived", "e2e_ideal_ms", "ideal (Eq. 4, derived)"),
        ],
        "iteration time (ms)",
    ),
    "fig6": (
        "fig6",
        [
            ("overlap", "power_mean_pct_tdp", "mean, overlap"),
            ("sequential", "power_mean_pct_tdp", "mean, sequential"),
            ("overlap", "power_peak_pct_tdp", "peak, overlap"),
            ("sequential", "power_peak_pct_tdp", "peak, sequential"),
        ],
        "% of TDP",
    ),
    "fig8": (
        "fig8",
        [
            ("derived", "slowdown", "matmul slowdown"),
            ("derived", "comm_slowdown", "communication slowdown"),
        ],
        "slowdown (ratio)",
    ),
    "fig9": (
        "fig9",
        [("overlap", "e2e_ms", "overlapped"), ("sequential", "e2e_ms", "sequential")],
        "iteration time (ms)",
    ),
    "fig10": ("fig10", [("derived", "slowdown", "compute slowdown")], "slowdown (ratio)"),
    "fig11": ("fig11", [("derived", "slowdown", "compute slowdown")], "slowdown (ratio)"),
}
# The paper's one Fig. 8 point (a 1 GiB all-reduce beside a matmul; FP16, the paper's
# main precision), boxed on the contention map.
PAPER_FIG8_POINT = {"comm_bytes": 1 << 30, "compute": "gemm-fp16"}
STATE_COLORS = {
    "overlap": "tab:red",
    "compute_only": "tab:blue",
    "comm_only": "tab:green",
    "idle": "tab:gray",
}


def _save(fig, out_dir: Path, name: str) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    png = out_dir / f"{name}.png"
    try:
        for path, opts in ((png, {"dpi": 110}), (out_dir / f"{name}.pdf", {})):
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


def bar_figure(
    figure: str, summary: pd.DataFrame, out_dir: Path, bands: list[tuple[str, float, float]]
) -> Path | None:
    """Grouped bars over configurations; `bands` are (label, low, high) of evaluated paper numbers."""
    source, series, ylabel = SERIES[figure]
    rows = summary[summary["figure"] == source]
    configs = sorted(set(rows["config_id"]))
    if not configs:
        return None
    fig, ax = plt.subplots(figsize=(max(6, 1.2 * len(configs) + 2), 4))
    width = 0.8 / len(series)
    x = np.arange(len(configs))
    for i, (mode, metric, label) in enumerate(series):
        sel = (
            rows[(rows["mode"] == mode) & (rows["metric"] == metric)]
            .set_index("config_id")
            .reindex(configs)
        )
        mean = sel["mean"].to_numpy(float)
        err = np.vstack(
            [mean - sel["ci_low"].to_numpy(float), sel["ci_high"].to_numpy(float) - mean]
        )
        ax.bar(
            x + (i - (len(series) - 1) / 2) * width,
            mean,
            width,
            yerr=np.nan_to_num(err),
            capsize=3,
            label=label,
        )
    for label, lo, hi in bands:
        ax.axhspan(lo, hi, color="gold", alpha=0.25, label=f"paper: {label}")
    ax.set_xticks(x, [c.replace("_", "\n", 2) for c in configs], fontsize=7)
    ax.set_ylabel(ylabel)
    ax.set_title(f"{figure} (error bars: 95% CI)")
    ax.legend(fontsize=7)
    return _save(fig, out_dir, figure)


def power_trace_figure(traces: list[Path], out_dir: Path) -> Path | None:
    """Fig. 7: power (% TDP) over normalised time, coloured by kernel-timeline state."""
    if not traces:
        return None
    fig, axes = plt.subplots(len(traces), 1, figsize=(8, 2.2 * len(traces)), squeeze=False)
    for ax, path in zip(axes[:, 0], traces, strict=True):
        df = pd.read_csv(path)
        ax.plot(df["t_norm"], df["power_pct_tdp"], color="black", lw=0.8)
        for state, color in STATE_COLORS.items():
            sel = df[df["state"] == state]
            ax.scatter(sel["t_norm"], sel["power_pct_tdp"], s=6, color=color, label=state)
        ax.set_title(path.stem.replace("-power", ""), fontsize=8)
        ax.set_ylabel("% of TDP")
        ax.legend(fontsize=6, ncol=4)
    axes[-1, 0].set_xlabel("time (normalised)")
    return _save(fig, out_dir, "fig7")


def contention_grid(
    summary: pd.DataFrame, configs: dict[str, dict], metric: str, column: str = "mean"
) -> dict[str, pd.DataFrame]:
    """mechanism -> compute kind (rows, by arithmetic intensity) x communication MiB (columns)."""
    rows = summary[
        (summary["figure"] == "contention")
        & (summary["mode"] == "derived")
        & (summary["metric"] == metric)
    ].copy()
    if rows.empty:
        return {}
    rows["mib"] = [configs[c]["comm_bytes"] / (1 << 20) for c in rows["config_id"]]
    rows["intensity"] = [configs[c]["intensity_flop_per_byte"] for c in rows["config_id"]]
    order = rows.groupby("model")["intensity"].first().sort_values().index
    return {
        mech: part.pivot_table(index="model", columns="mib", values=column).reindex(order)
        for mech, part in rows.groupby("parallelism")
    }


def contention_figure(
    summary: pd.DataFrame, configs: dict[str, dict], out_dir: Path, paper_point: dict
) -> Path | None:
    """Heat maps of compute and communication slowdown over communication size x compute
    kind, one column a mechanism; the paper's one Fig. 8 point is boxed in blue."""
    panels = [
        ("slowdown", "compute slowdown (Eq. 1)"),
        ("comm_slowdown", "communication slowdown"),
    ]
    grids = {metric: contention_grid(summary, configs, metric) for metric, _ in panels}
    mechs = sorted(grids["slowdown"])
    if not mechs:
        return None
    fig, axes = plt.subplots(
        len(panels), len(mechs), figsize=(4.8 * len(mechs), 3.4 * len(panels)), squeeze=False
    )
    for r, (metric, title) in enumerate(panels):
        for c, mech in enumerate(mechs):
            ax = axes[r, c]
            grid = grids[metric].get(mech)
            if grid is None:
                ax.set_axis_off()
                continue
            values = 100 * grid.to_numpy(float)
            image = ax.imshow(values, cmap="magma_r", vmin=0, vmax=max(50, np.nanmax(values)))
            for (i, j), v in np.ndenumerate(values):
                ax.text(
                    j,
                    i,
                    "-" if np.isnan(v) else f"{v:.0f}",
                    ha="center",
                    va="center",
                    fontsize=7,
                    color="white" if v > 30 else "black",
                )
            ax.set_xticks(range(grid.shape[1]), [f"{m:g}" for m in grid.columns], fontsize=7)
            ax.set_yticks(range(grid.shape[0]), list(grid.index), fontsize=7)
            ax.set_xlabel("communication size (MiB)", fontsize=7)
            ax.set_title(f"{mech}: {title} (%)", fontsize=8)
            mib = paper_point["comm_bytes"] / (1 << 20)
            if paper_point["compute"] in grid.index and mib in grid.columns:
                i, j = list(grid.index).index(paper_point["compute"]), list(grid.columns).index(mib)
                ax.add_patch(
                    plt.Rectangle(
                        (j - 0.5, i - 0.5),
                        1,
                        1,
                        fill=False,
                        lw=2,
                        edgecolor="deepskyblue",
                    )
                )
            fig.colorbar(image, ax=ax, fraction=0.046)
    fig.suptitle(
        "Contention map (rows: compute kinds by arithmetic intensity, low to high)", fontsize=9
    )
    return _save(fig, out_dir, "contention")
