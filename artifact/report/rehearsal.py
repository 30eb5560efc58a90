"""The dress rehearsal's part of the report (preset rehearsal): its first line, and its
functional checks (artifact/judge/rehearsal.py) as a table. Nothing else of a rehearsal
is judged: its paper items, controls and checks read "not applicable" with why."""

from __future__ import annotations

from artifact.figures import all_figures
from artifact.judge.figure_status import figure_status
from artifact.judge.rehearsal import FIGURE, ITEMS, REFERENCE
from artifact.report.document import Doc
from artifact.results import Results


def _checks(run: Results):
    v = run.verdicts
    return v[(v["figure"] == FIGURE) & (v["item"].isin(list(ITEMS)))]


def _where(run: Results) -> str:
    world = max((int(c.get("world_size") or 0) for c in run.configs.values()), default=0)
    ranks = f"{world} ranks" if world else "the ranks"
    if not run.gpus:
        return f"{ranks} as gloo processes on the CPU"
    k = run.ranks_per_gpu
    gpus = ", ".join(run.gpus)
    if k == 1:
        return f"{ranks}, one a GPU ({gpus}), over {_library(run)}"
    served = (
        "under an MPS daemon of the run's own"
        if "True" in run.seen("mps")
        else "time-sliced: no MPS"
    )
    shared = f"sharing one {gpus}" if k == world else f"{k} sharing each {gpus}"
    return f"{ranks} {shared} ({served}), over {_library(run)}"


def _not_through(run: Results) -> str:
    """The figures that did not run through, by state ('Every figure ran.' where all did)."""
    states: dict[str, list[str]] = {}
    for fig in all_figures():
        state, _ = figure_status(fig, run.status, run.summary)
        if state != "ran":
            states.setdefault(state, []).append(fig)
    if not states:
        return "Every figure ran. "
    said = "; ".join(f"{state}: {', '.join(figs)}" for state, figs in states.items())
    return f"Not every figure ran through ({said}; section 'What ran' says why). "


def _library(run: Results) -> str:
    nccl = run.provenance.get("nccl")
    return f"NCCL {nccl}" if nccl else "NCCL"


def first_line(run: Results) -> str:
    checks = _checks(run)
    held = int((checks["verdict"] == "holds").sum())
    return (
        f"**Dress rehearsal of the multi-GPU path: {_where(run)}. No number here measures "
        "the paper's quantities, and no item of the paper is judged.** "
        f"What it checks is that the path runs: {held} of {len(ITEMS)} functional checks "
        f"hold (section 'Dress rehearsal: functional checks'). {_not_through(run)}Every paper "
        "item, control and check below reads 'not applicable', with why."
    )


def section(doc: Doc, run: Results) -> None:
    if not run.rehearsal:
        return
    doc.h(1, "Dress rehearsal: functional checks")
    doc.p(
        "Each rank counted its own collectives in every measured step: how many it issued, "
        "the bytes a ring moves for each (all-gather and reduce-scatter (W-1)/W of the "
        "gathered buffer, all-reduce 2(W-1)/W), and a pipeline stage's point-to-point "
        "bytes sent and received. The FSDP rows are held to what `--emulate-world` moves "
        f"for rank 0 of the same configuration (its records in `{REFERENCE}/`), the "
        "pipeline's to its 1F1B schedule: each micro-batch's activation forward over every "
        "stage boundary and its gradient back."
    )
    doc.table(
        ["check", "verdict", "readings", "why"],
        [
            [ITEMS[r.item], r.verdict, "" if r.n != r.n else f"{int(r.n)}", r.reason]
            for r in _checks(run).itertuples()
        ],
    )
