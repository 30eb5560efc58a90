"""The dress rehearsal's functional checks (preset rehearsal, `nox -s rehearsal`).

A rehearsal runs README's W-rank path where ranks may share a GPU (or are gloo processes
on a CPU), so none of its numbers measures the paper's quantities. What it can check is
that the path works, from what each rank counted of its own collectives a step
(artifact.rank.modes.COUNTS, in every training record's `per_rank`):

- ranks: every record holds every rank's numbers (W of them);
- collectives: in every phase that communicates, every rank issued collectives; the
  ranks of an FSDP ring issued the same number; each pipeline stage issued at least its
  1F1B sends and receives;
- bytes: each FSDP rank moved what `--emulate-world W` moves for rank 0 of the same
  configuration (its records in OUT/reference/, the emulation's byte counts), and each
  pipeline stage sent and received its 1F1B activations and gradients
  (artifact.core.traffic);
- zero bytes: the zero-byte controls issued the collectives of their mode and moved
  nothing.

Each check is one row of verdicts.csv (item_type "check"): holds, fails (with the
configurations, phases and ranks that broke it), or not run (no records to read).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path

from artifact.core import traffic
from artifact.core.config import MODELS
from artifact.core.phases import CONTROL_PHASES, Mode, mode_of
from artifact.judge.verdicts import Verdict, as_sentence
from artifact.store import RunStore

REFERENCE = "reference"  # OUT/reference/: the emulated reference run's folder
ITEMS = {
    "rehearsal_ranks": "Every rank wrote its numbers into every record",
    "rehearsal_collectives": "Every collective ran: every rank communicated in every phase "
    "that communicates; FSDP ranks issued the same collectives; each pipeline stage its "
    "1F1B sends and receives",
    "rehearsal_bytes": "The bytes each rank moved equal the formulas: ZeRO-3 and FSDP2 "
    "ranks what --emulate-world moves for rank 0 (the reference run), pipeline stages "
    "their 1F1B activations and gradients",
    "rehearsal_zero_bytes": "The zero-byte controls ran their mode's collectives and moved nothing",
}
FIGURE = "rehearsal"  # the rows' figure column: the checks span every training figure
TOLERANCE = 1e-6  # relative: byte counts are exact; this absorbs MiB's float rounding
_SHOWN = 4  # failures named in a reason


def _itemsize(precision: str) -> int:
    return 4 if precision in ("fp32", "tf32") else 2


def _counted(record: dict) -> bool:
    return any("comm_calls_per_step" in r for r in record.get("per_rank") or [])


def _where(r: dict, rank: int | None = None) -> str:
    at = f"{r['config_id']} {r['mode']} rep {r['rep']}"
    return at if rank is None else f"{at} rank {rank}"


def ranks_check(records: list[dict]) -> list[str]:
    """What breaks 'every rank wrote its numbers': a record short of ranks, or a rank
    whose numbers are missing (none, or fewer kinds than its peers report)."""
    broken = []
    for r in records:
        world = int(r["config"].get("world_size") or r["provenance"].get("world_size") or 1)
        ranks = r.get("per_rank") or []
        if len(ranks) != world:
            broken.append(f"{_where(r)}: {len(ranks)} of {world} ranks")
            continue
        every = set().union(*(p.keys() for p in ranks))
        for k, p in enumerate(ranks):
            finite = [v for v in p.values() if isinstance(v, int | float) and math.isfinite(v)]
            if not finite or set(p) != every:
                missing = ", ".join(sorted(every - set(p))) or "every number"
                broken.append(f"{_where(r, k)}: no {missing}")
    return broken


def _communicates(r: dict) -> bool:
    return mode_of(r["mode"]) is not Mode.NOCOMM


def collectives_check(records: list[dict]) -> list[str]:
    broken = []
    for r in (r for r in records if _communicates(r)):
        calls = [p["comm_calls_per_step"] for p in r["per_rank"]]
        if r["config"]["parallelism"] == "pipeline":
            m, stages = int(r["config"]["num_microbatches"]), len(calls)
            for stage, c in enumerate(calls):
                # each boundary: m forward sends or receives, m backward ones
                need = 2 * m * ((stage < stages - 1) + (stage > 0))
                if c < need:
                    broken.append(f"{_where(r, stage)}: {c:g} collectives, 1F1B needs {need}")
            continue
        if min(calls) <= 0:
            broken.append(f"{_where(r)}: a rank issued none ({', '.join(f'{c:g}' for c in calls)})")
        elif len(set(calls)) > 1:
            broken.append(f"{_where(r)}: ranks issued {', '.join(f'{c:g}' for c in calls)}")
    return broken


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=TOLERANCE, abs_tol=1e-9)


def _reference_mib(reference: list[dict]) -> dict[tuple[str, str], float]:
    """(real config id, phase) -> what the emulation moved for rank 0 a step (the id names
    model, implementation, precision, micro-batch and world: any figure's will do)."""
    out = {}
    for r in reference:
        world = r["config"].get("emulated_world") or r["provenance"].get("emulated_world")
        real_id = r["config_id"].removesuffix(f"_e{world}")
        mib = [p.get("emulated_mib_per_step") for p in r.get("per_rank") or []]
        if mib and mib[0] is not None:
            out[(real_id, r["mode"])] = mib[0]
    return out


def _pipeline_bytes(r: dict) -> list[str]:
    c = r["config"]
    model = MODELS[c["model"]]
    seq = int(c.get("seq_len") or model.seq_len)
    activation = int(c["micro_batch"]) * seq * model.hidden * _itemsize(c["precision"])
    stages, broken = len(r["per_rank"]), []
    for stage, p in enumerate(r["per_rank"]):
        sent, received = traffic.pipeline_p2p_bytes(
            stage, stages, int(c["num_microbatches"]), activation
        )
        got = (p["p2p_sent_mib_per_step"] * 2**20, p["p2p_recv_mib_per_step"] * 2**20)
        if not (_close(got[0], sent) and _close(got[1], received)):
            broken.append(
                f"{_where(r, stage)}: sent {got[0]:.0f} B, received {got[1]:.0f} B a step; "
                f"1F1B: {sent} B each"
            )
    return broken


def _moves_data(r: dict) -> bool:
    return _communicates(r) and r["mode"] not in CONTROL_PHASES


def bytes_check(records: list[dict], reference: list[dict]) -> list[str]:
    """What breaks 'the bytes equal the formulas' (an FSDP reading without its reference
    breaks it too: nothing says what it should have moved)."""
    ref = _reference_mib(reference)
    broken = []
    for r in filter(_moves_data, records):
        if r["config"]["parallelism"] == "pipeline":
            broken += _pipeline_bytes(r)
            continue
        want = ref.get((r["config_id"], r["mode"]))
        if want is None:
            broken.append(f"{_where(r)}: no reference (no emulated record of it in {REFERENCE}/)")
            continue
        for k, p in enumerate(r["per_rank"]):
            if not _close(p["comm_mib_per_step"], want):
                broken.append(
                    f"{_where(r, k)}: {p['comm_mib_per_step']:.6g} MiB a step; "
                    f"the emulation's rank 0: {want:.6g}"
                )
    return broken


def zero_bytes_check(records: list[dict]) -> list[str]:
    calls = {
        (r["figure"], r["config_id"], r["rep"], r["mode"]): [
            p["comm_calls_per_step"] for p in r["per_rank"]
        ]
        for r in records
    }
    broken = []
    for r in (r for r in records if r["mode"] in CONTROL_PHASES):
        for k, p in enumerate(r["per_rank"]):
            moved = p["comm_mib_per_step"] + p["p2p_sent_mib_per_step"] + p["p2p_recv_mib_per_step"]
            if moved:
                broken.append(f"{_where(r, k)}: moved {moved:.6g} MiB a step")
        twin = calls.get((r["figure"], r["config_id"], r["rep"], str(mode_of(r["mode"]))))
        mine = [p["comm_calls_per_step"] for p in r["per_rank"]]
        if twin is not None and twin != mine:
            broken.append(
                f"{_where(r)}: {', '.join(f'{c:g}' for c in mine)} collectives; "
                f"its mode: {', '.join(f'{c:g}' for c in twin)}"
            )
    return broken


def _row(item: str, broken: list[str], n: int, what: str) -> Verdict:
    if not n:
        verdict, reason = "not run", f"no {what} to check"
    elif broken:
        more = f"; and {len(broken) - _SHOWN} more" if len(broken) > _SHOWN else ""
        verdict, reason = (
            "fails",
            f"{len(broken)} of its readings broke it: " + "; ".join(broken[:_SHOWN]) + more,
        )
    else:
        verdict, reason = "holds", f"every one of {n} {what} checked"
    return Verdict(
        figure=FIGURE,
        item=item,
        verdict=verdict,
        reason=as_sentence(reason),
        statement=ITEMS[item],
        n=n,
        item_type="check",
    )


def load(out: Path) -> tuple[list[dict], list[dict], list[dict]]:
    """Every record of the folder, those that counted their traffic, and the reference's."""
    records = list(RunStore(Path(out)).records())
    ref_dir = Path(out) / REFERENCE
    reference = list(RunStore(ref_dir).records()) if (ref_dir / "records").is_dir() else []
    return records, [r for r in records if _counted(r)], reference


def check_rows(
    records: Iterable[dict], counted: list[dict], reference: list[dict]
) -> list[Verdict]:
    """The four functional checks as verdict rows."""
    records = list(records)
    controls = [r for r in counted if r["mode"] in CONTROL_PHASES]
    return [
        _row("rehearsal_ranks", ranks_check(records), len(records), "records"),
        _row(
            "rehearsal_collectives",
            collectives_check(counted),
            sum(map(_communicates, counted)),
            "training records that communicate",
        ),
        _row(
            "rehearsal_bytes",
            bytes_check(counted, reference),
            sum(map(_moves_data, counted)),
            "training records that move data",
        ),
        _row(
            "rehearsal_zero_bytes", zero_bytes_check(counted), len(controls), "zero-byte controls"
        ),
    ]
