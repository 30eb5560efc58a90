"""The report's "Emulated W-GPU preview (one GPU)" section (`run --emulate-world W`), and
the emulated-beside-real table for when a multi-GPU run of the same configurations exists.

Emulated rows are never in the paper's tally (artifact.judge.compare: item_type
"preview"); here they are shown beside the paper's numbers, with what they cannot mean.
"""

from __future__ import annotations

import math

import pandas as pd

from artifact.core.emulated import EMULATED_SUFFIX, stand_in_of, validation_sentence
from artifact.core.units import MIB
from artifact.judge.controls import WHAT
from artifact.judge.verdicts import counted, of_type, readings
from artifact.report.appendix import expected_text, measured_text
from artifact.report.document import Doc
from artifact.report.instrument import readings_sentence, with_source
from artifact.results import Results

FIDELITY = (
    "Each row here is rank 0 of a W-rank job run alone on one GPU under torch's fake process "
    "group: its model shard, optimizer state, micro-batches, schedule and memory are those of "
    "rank 0 at W, and every collective the modes route moves the bytes rank 0 would move in "
    "a ring at W ((W-1)/W of the buffer for all-gather and reduce-scatter, 2(W-1)/W for "
    "all-reduce) as device-side copies on a communication stream, paced to the link's "
    "bandwidth. What it cannot show: the real NVLink and NCCL protocol (NCCL's kernels run on "
    "a few SMs for the link's time; a copy kernel uses many SMs for a shorter time, then a "
    "one-thread pacing kernel holds the stream: the link column says what the copies "
    "achieved alone), the peers' load on the link and on the "
    "memory system, stragglers among ranks, and a pipeline's bubble (pipelines are not "
    "emulated). So these slowdowns preview the contention one GPU's own traffic causes; "
    "they are not the paper's multi-GPU numbers and never count as reproducing them. In "
    "short: no real NVLink or NCCL protocol, no peers' load, no pipeline bubble. With "
    "--stand-in nccl-shaped the bytes move instead in one persistent kernel of C CTAs a "
    "collective, shaped as NCCL's ring (the stand-in column says which ran); it is "
    "checked against co-located NCCL ranks by the contention map, one W at a time, and until "
    "that check holds on this GPU model at the W it emulates: stand-in not validated on this "
    "GPU."
)


def _stand_in(config: dict) -> str:
    name = config.get("stand_in") or stand_in_of(config.get("config_id", "")) or "copy"
    return f"{name} ({config['comm_ctas']} CTAs)" if config.get("comm_ctas") else name


def _ci(row) -> str:
    if row is None or pd.isna(row["mean"]):
        return "-"
    if pd.isna(row["ci_low"]) or math.isnan(float(row["ci_low"])):
        return f"{100 * row['mean']:+.1f} %"
    return f"{100 * row['mean']:+.1f} % [{100 * row['ci_low']:+.1f}, {100 * row['ci_high']:+.1f}]"


def _row(summary: pd.DataFrame, config_id: str, mode: str, metric: str):
    """The summary's row of a configuration's metric in a mode; None if there is none."""
    rows = summary[
        (summary["config_id"] == config_id)
        & (summary["mode"] == mode)
        & (summary["metric"] == metric)
    ]
    return None if rows.empty else rows.iloc[0]


def _derived(summary: pd.DataFrame, config_id: str, metric: str):
    return _row(summary, config_id, "derived", metric)


def _measured(summary: pd.DataFrame, config_id: str, mode: str, metric: str) -> str:
    row = _row(summary, config_id, mode, metric)
    return "-" if row is None else f"{row['mean']:.4g}"


def _share_text(share: float | None) -> str:
    return "-" if share is None else f"{100 * share:.1f} % of compute"


def _peak_text(summary: pd.DataFrame, config_id: str, estimate) -> str:
    """Rank 0's measured peak in `overlap` beside the estimate the run's fit check used
    (the plan's fit decisions at W rest on it)."""
    row = _row(summary, config_id, "overlap", "peak_memory_gib")
    if row is None or pd.isna(row["mean"]):
        return "-"
    if not estimate:
        return f"{row['mean']:.1f}"
    return f"{row['mean']:.1f} of {estimate:.1f} (x{row['mean'] / estimate:.2f})"


def _link_text(summary: pd.DataFrame, config_id: str, paced) -> str:
    """The link the copies achieved in `sequential` (alone on the GPU: bytes over the
    trace's communication time), beside the bandwidth they were paced to."""
    mib, ms = (_row(summary, config_id, "sequential", m) for m in ("emulated_mib_per_step", "communication_ms"))  # fmt: skip
    got = "-"
    if mib is not None and ms is not None and ms["mean"] > 0:
        got = f"{mib['mean'] * MIB / (ms['mean'] / 1e3) / 1e9:.0f}"
    return f"{got} (of {paced:g})" if paced else got


def beside_share(summary: pd.DataFrame, config_id: str) -> float | None:
    """The share of compute time that ran beside communication in `overlap`: overlapped
    time (overlap fraction x communication time) over compute time, from the means."""
    if not {"config_id", "mode", "metric", "mean"} <= set(summary.columns):
        return None
    metrics = ("overlap_fraction", "communication_ms", "compute_ms")
    rows = [_row(summary, config_id, "overlap", m) for m in metrics]
    if any(r is None or pd.isna(r["mean"]) for r in rows) or rows[2]["mean"] <= 0:
        return None
    return float(rows[0]["mean"] * rows[1]["mean"] / rows[2]["mean"])


def paper_mean_slowdown(verdicts: pd.DataFrame) -> float | None:
    """The paper's mean compute slowdown (the headline item), from expected/ via verdicts."""
    if "expected" not in verdicts.columns:
        return None
    rows = verdicts[verdicts["item"] == "compute_slowdown_mean"]["expected"]
    return float(rows.iloc[0]) if not rows.empty and pd.notna(rows.iloc[0]) else None


def most_beside(summary: pd.DataFrame, config_ids) -> float | None:
    """The largest share of compute beside communication over `config_ids` (None: none has one)."""
    shares = [x for c in config_ids if (x := beside_share(summary, c)) is not None]
    return max(shares, default=None)


def eq1_bound(share: float) -> float:
    """The most Eq. 1 can read if only the kernels beside communication slowed, however
    slow they ran: the slowed time lies within `share` of overlap's compute, so at most
    share / (1 - share) of the sequential compute."""
    return share / (1 - share)


def bound_sentence(top: float, paper: float | None, rows: str = "the emulated rows") -> str:
    """How far Eq. 1 can go where at most `top` of compute time ran beside communication."""
    text = (
        f"Only {100 * top:.1f} % of compute time ran beside communication here (the most over "
        f"{rows}). If only those kernels slowed, Eq. 1, which averages over all "
        f"compute, can read at most {100 * eq1_bound(top):.1f} %, however slow they ran"
    )
    if paper is None:
        return text + "."
    need = paper / (1 + paper)
    return text + (
        f"; the paper's {100 * paper:.1f} % mean needs at least {100 * need:.1f} % of compute "
        "time beside communication."
    )


def side_by_side(summary: pd.DataFrame, metrics=("slowdown", "sequential_penalty")) -> list[list]:
    """Each emulated configuration beside the real one it stands in for (the same id
    without `_e{W}`, run on W real ranks), where both are in the folder: the check of
    emulation once a multi-GPU run exists."""
    out = []
    for config_id in sorted(set(summary["config_id"])):
        m = EMULATED_SUFFIX.search(str(config_id))
        real_id = config_id[: m.start()] if m else None
        if not real_id or real_id not in set(summary["config_id"]):
            continue
        for metric in metrics:
            emulated, real = (_derived(summary, c, metric) for c in (config_id, real_id))
            if emulated is None and real is None:
                continue
            out.append([real_id, m.group(1), metric, _ci(real), _ci(emulated)])
    return out


def _rows_table(doc: Doc, run: Results, emulated: list[str]) -> None:
    """One row an emulated configuration, then how far its overlap lets Eq. 1 go."""
    s = run.summary
    shares = {c: beside_share(s, c) for c in emulated}
    doc.table(
        ["configuration", "W", "stand-in", "Eq. 1 slowdown", "sequential penalty",
         "compute beside communication (overlap)", "MiB per step (overlap)",
         "link achieved in sequential, GB/s (of paced)",
         "rank 0's peak GiB (overlap) of the estimate"],
        [
            [c, str(run.emulated_world(c) or "?"), _stand_in(run.configs.get(c, {}) | {"config_id": c}),
             _ci(_derived(s, c, "slowdown")), _ci(_derived(s, c, "sequential_penalty")),
             _share_text(shares[c]),
             _measured(s, c, "overlap", "emulated_mib_per_step"),
             _link_text(s, c, run.provenance.get("emulated_link_gbps")),
             _peak_text(s, c, run.configs.get(c, {}).get("memory_estimate_gib"))]
            for c in emulated
        ],
    )  # fmt: skip
    known = [x for x in shares.values() if x is not None]
    if known:
        doc.p(
            "Compute beside communication: the overlap fraction times communication time, "
            "over compute time (means of `overlap`). "
            + bound_sentence(max(known), paper_mean_slowdown(run.verdicts))
        )


def preview_section(doc: Doc, run: Results) -> None:
    """The section, where the folder has emulated rows."""
    emulated = run.emulated_configs
    if not emulated:
        return
    doc.h(2, "Emulated W-GPU preview (one GPU)")
    doc.p(FIDELITY + " " + validation_sentence(run.provenance.get("gpu_model")))
    _rows_table(doc, run, emulated)
    s = run.summary
    previews = of_type(run.verdicts, "preview")
    rows = counted(run.verdicts, "preview")
    counted_here = rows["verdict"].value_counts()
    if not counted_here.empty:
        doc.p(
            "The preview's own tally, never the paper's (its items, its zero-byte controls "
            f"and the V1 rows of its configurations): {len(rows)} verdicts on "
            f"{readings(rows)} readings (a reading: one configuration's records and one "
            "metric; several items, or a mean over configurations, may read the same one): "
            + ", ".join(f"{v} {n}" for v, n in counted_here.items())
            + "."
        )
    controls = previews[previews["item"].str.startswith("control_")]
    if not controls.empty:
        doc.p(
            "Zero-byte controls of the emulated path (the same modes with nothing moved; each "
            "must read 0, as the negative controls above; a slowdown or penalty is judged "
            f"beyond its control). {readings_sentence(controls, 'preview')}"
        )
        doc.table(
            ["figure", "configuration", "control", "mean [95% CI]", "n", "verdict"],
            [
                [r.figure, with_source(r), WHAT[r.item],
                 _ci(r._asdict()), "-" if pd.isna(r.n) else f"{int(r.n)}", r.verdict]
                for r in controls.itertuples()
            ],
        )  # fmt: skip
    items = previews[~previews["item"].str.startswith("control_")]
    if not items.empty:
        doc.p("The paper's numbers beside the preview (not counted in the tally):")
        doc.table(
            ["figure", "statement", "paper", "configuration", "preview: mean [95% CI]", "verdict"],
            [
                [r.figure, r.statement, expected_text(r), r.config_id, measured_text(r), r.verdict]
                for r in items.itertuples()
            ],
        )  # fmt: skip
    pairs = side_by_side(s)
    if pairs:
        doc.p("Emulated beside real (the same configuration on W real ranks):")
        doc.table(["configuration", "W", "metric", "real", "emulated"], pairs)
