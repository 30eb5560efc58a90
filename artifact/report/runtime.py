"""How long each figure of this run took, read from the run itself: the records'
timestamps (first to last record, less the pauses between them), how many times the
figure was started (each start writes store.RUN_HEADER into its log) and how long those
starts took, start-up and set-up in (each writes store.RUN_END with its wall time). Records copied
from another figure (rank/reuse.py) keep that figure's timestamps: they are counted apart
and take no part in the time."""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from artifact.store import RUN_END, RUN_HEADER, RunStore

# A gap between two records this long, and PAUSE_FACTOR times the figure's usual gap, is
# a pause (a stopped run resumed later, or an unusually slow set-up), not measuring time.
PAUSE_MIN_S = 120.0
PAUSE_FACTOR = 5.0


@dataclass
class FigureTime:
    records: int
    span_s: float  # first to last record
    pauses_s: list[float] = field(default_factory=list)
    starts: int = 0  # runs started into this folder (its log's RUN_HEADER lines)
    copied: dict[str, int] = field(default_factory=dict)  # source figure -> records copied
    wall_s: float | None = None  # the starts' wall time (RUN_END lines); None: one lacks it

    @property
    def active_s(self) -> float:
        return self.span_s - sum(self.pauses_s)


def _stamps(out: Path, figure: str) -> tuple[list[datetime], dict[str, int]]:
    """The measured records' timestamps, and how many records came from which figure."""
    stamps, copied = [], {}
    for record in RunStore(out).readable_records(figure):
        try:
            stamp = record["provenance"]["timestamp"]
        except (KeyError, TypeError):
            continue  # a record without a timestamp says nothing about time
        if source := record.get("reused_from"):
            copied[source] = copied.get(source, 0) + 1
        else:
            stamps.append(datetime.fromisoformat(stamp))
    return sorted(stamps), copied


def figure_time(out: Path, figure: str) -> FigureTime | None:
    """`figure`'s time in the run folder `out`; None where it holds no records of it."""
    stamps, copied = _stamps(Path(out), figure)
    if not stamps and not copied:
        return None
    gaps = [(b - a).total_seconds() for a, b in zip(stamps, stamps[1:], strict=False)]
    # records written together (one a phase) are a millisecond apart: not a gap
    usual = statistics.median([g for g in gaps if g > 1.0] or [0.0])
    pauses = [g for g in gaps if g > max(PAUSE_MIN_S, PAUSE_FACTOR * usual)]
    log = Path(out) / "logs" / f"{figure}.log"
    text = log.read_text(errors="replace") if log.is_file() else ""
    # (no ^: a rank's last line without its newline leaves the end line mid-line)
    ends = re.findall(rf"{re.escape(RUN_END)} .* after ([0-9.]+) s$", text, re.M)
    starts = text.count(RUN_HEADER)
    span = (stamps[-1] - stamps[0]).total_seconds() if stamps else 0.0
    # a start without its end line (the CLI killed outright, or a log older than the end
    # lines) has no wall time: a partial sum would read as the whole
    wall = sum(map(float, ends)) if ends and len(ends) == starts else None
    return FigureTime(len(stamps), span, pauses, starts, copied, wall)
