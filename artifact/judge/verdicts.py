"""verdicts.csv: the contract between compare (which writes it) and the report (which
only reads it; docs/design.md section 5)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from artifact.command import invocation
from artifact.core.errors import ArtifactError

VERDICTS = ("reproduced", "not reproduced", "inconclusive", "not applicable", "not run")
# the artifact's own validation checks (V1, V2; item_type "check") hold or fail; they are
# not claims of the paper and never count as reproduced
CHECK_VERDICTS = ("holds", "fails", "inconclusive", "not applicable", "not run")
# item_type: the paper's numbers and claims (expected/*.yaml); the artifact's checks (V1,
# V2); the negative controls (artifact/judge/controls.py), judged as checks; and proxy evidence,
# the paper's items judged on one-GPU proxies, shown apart and never in the paper's tally;
# and the emulated preview (--emulate-world: rank 0 of W alone), items and controls
# judged on emulated rows, shown beside the paper's and never in its tally either
KINDS = ("number", "claim", "check", "control", "proxy", "preview")
PAPER_KINDS = ("number", "claim")
PREVIEW_VERDICTS = tuple(dict.fromkeys(VERDICTS + CHECK_VERDICTS))
# Fewer repetitions than this and a number or a check is not judged either way
# (docs/measurement.md, "Statistics"): at n = 3 even an honest interval is too wide to
# tell much, and the bootstrap intervals this replaced covered the truth only 73 % of the time.
MIN_REPETITIONS = 5


@dataclass(frozen=True)
class Verdict:
    """One row of verdicts.csv; COLUMNS are its fields, in order. A field left None or NaN
    is an empty cell."""

    figure: str
    item: str
    expected: str | None = None
    tolerance: str | None = None
    mean: float = math.nan
    ci_low: float = math.nan
    ci_high: float = math.nan
    verdict: str = ""
    reason: str = ""
    n: float = math.nan
    ci_method: str | None = None
    # the paper's item, for a reader: its statement, the metric and unit of expected /
    # mean / CI ('ratio': 0.189 is 18.9 %), measured or derived, and where in the paper
    statement: str | None = None
    metric: str | None = None
    unit: str | None = None
    kind: str | None = None
    source: str | None = None
    item_type: str = ""  # number / claim (expected/*.yaml), check (V1, V2), control, ...
    config_id: str = ""  # a check's configuration (empty: the item spans configurations)
    # the tally the row counts in (COUNTED_IN: "paper" is the paper's), so a script counts
    # verdicts.csv with no knowledge of item types; empty: a copied configuration's row,
    # counted once under the figure `same_records_as` names (FigureSpec.reuses)
    counted_in: str = ""
    same_records_as: str = ""

    @classmethod
    def of(cls, row: Mapping[str, Any]) -> Verdict:
        """A row built as a mapping (a judge of its own); a key not in COLUMNS is refused."""
        if unknown := set(row) - set(COLUMNS):
            raise TypeError(f"not a verdict column: {', '.join(sorted(unknown))}")
        return cls(**row)

    def row(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @property
    def judged(self) -> bool:
        """Whether the verdict reads either way (reproduced or not reproduced)."""
        return self.verdict in ("reproduced", "not reproduced")


COLUMNS = [f.name for f in dataclasses.fields(Verdict)]


def table(verdicts: Iterable[Verdict]) -> pd.DataFrame:
    """verdicts.csv's table of `verdicts`, in COLUMNS' order."""
    return pd.DataFrame([v.row() for v in verdicts], columns=COLUMNS)


def as_sentence(text: str) -> str:
    """A reason as a sentence: capital first, full stop last (compare's and the report's)."""
    text = text.strip()
    if not text:
        return text
    return text[0].upper() + text[1:] + ("" if text.endswith((".", ")", "!", "?")) else ".")


# counted_in's values, in the order a reader counts them: the paper's items, the negative
# controls, the artifact's checks (V1, V2), proxy evidence, the emulated preview (its
# items, controls and V1 together)
COUNTED_IN = ("paper", "control", "check", "proxy", "preview")


def counted_in(item_type: str, emulated: bool = False) -> str:
    """The tally a row of `item_type` counts in: a check or control of an emulated
    configuration counts with the preview."""
    if item_type in PAPER_KINDS:
        return "paper"
    return "preview" if emulated else item_type


def paper_items(verdicts: pd.DataFrame) -> pd.DataFrame:
    """The rows that judge the paper's numbers and claims: not the artifact's checks, its
    negative controls, or proxy evidence."""
    return verdicts[verdicts["item_type"].isin(PAPER_KINDS)]


def of_type(verdicts: pd.DataFrame, item_type: str) -> pd.DataFrame:
    return verdicts[verdicts["item_type"] == item_type]


# the item types beside the paper's, in the order a reader counts them: label, verdicts
OTHER_KINDS = {
    "control": ("negative controls", CHECK_VERDICTS),
    "check": ("checks (V1, V2)", CHECK_VERDICTS),
    "proxy": ("proxy evidence (not counted)", VERDICTS),
    "preview": ("emulated preview (not counted)", PREVIEW_VERDICTS),
}


def tally(verdicts: pd.DataFrame) -> str:
    """One line of counts: the paper's items, then the controls, the artifact's checks and
    the proxy evidence where there are any (compare and the report). Each row counts in
    the tally its `counted_in` names, so a reading copied from another figure counts once."""
    paper = counted(verdicts, "paper")["verdict"].value_counts()
    line = "paper: " + ", ".join(f"{v} {paper.get(v, 0)}" for v in VERDICTS)
    for item_type, (label, values) in OTHER_KINDS.items():
        rows = counted(verdicts, item_type)
        counts = rows["verdict"].value_counts()
        if not counts.empty:
            if item_type in ("proxy", "preview"):  # the paper's items on rows not the paper's
                n, items = readings(rows), rows["item"].nunique()
                label = (
                    f"{label[:-1]}; {n} reading{'s' if n != 1 else ''} of {items} "
                    f"item{'s' if items != 1 else ''})"
                )
            line += f"; {label}: " + ", ".join(f"{v} {counts.get(v, 0)}" for v in values)
    return line


def readings(rows: pd.DataFrame) -> int:
    """How many readings the rows rest on: a reading is one configuration's records and one
    metric, so several items (or a mean over configurations) that read it count it once."""
    found = set()
    for r in rows.itertuples():
        configs = [c for c in str(r.config_id or "").split("; ") if c] or [f"item:{r.item}"]
        found |= {(str(getattr(r, "metric", "")), c) for c in configs}
    return len(found)


def counted(verdicts: pd.DataFrame, tally_name: str) -> pd.DataFrame:
    """The rows that count in one tally (counted_in), each reading once; a table without
    the column (older, or made by hand) counts by item type."""
    if "counted_in" not in verdicts:
        return verdicts[verdicts["item_type"].map(counted_in) == tally_name]
    return verdicts[verdicts["counted_in"] == tally_name]


def row_kinds(verdicts: pd.DataFrame) -> str:
    """How many rows of each kind: '26 of the paper's items, 36 negative controls, ...'."""
    parts = [f"{len(paper_items(verdicts))} of the paper's items"]
    for item_type, (label, _) in OTHER_KINDS.items():
        if n := len(counted(verdicts, item_type)):
            parts.append(f"{n} {label}")
    return ", ".join(parts)


def equivalence(
    low: float, high: float, n: int, edges: tuple[float, float], percent: bool = False
) -> tuple[str, str]:
    """The one equivalence rule of every judged number (the paper's numbers, V1, V2's
    slopes, the negative controls): (verdict, why) of a 95 % CI against the band `edges`.
    It holds where the whole CI lies inside the band, fails where it lies wholly outside,
    and is inconclusive where it reaches across an edge (the reason says which and by how
    much), or with fewer than MIN_REPETITIONS repetitions: a wide interval is no evidence
    of a match. `percent` writes the band in % and gaps in points (the edges are
    fractions), as the rows it sits in write their CIs."""
    if n < MIN_REPETITIONS:
        return (
            "inconclusive",
            f"too few repetitions to check (n = {n}; a check needs {MIN_REPETITIONS})",
        )
    return band_verdict(low, high, edges, percent)


def band_verdict(
    low: float, high: float, edges: tuple[float, float], percent: bool = False, unit: str = ""
) -> tuple[str, str]:
    """equivalence without its count of repetitions (compare's numbers gate that apart):
    'holds', 'fails' or 'inconclusive', and why in words. `unit` names a plain unit."""
    scale, suffix, gap_unit = (
        (100, " %", " points") if percent else (1, f" {unit}".rstrip(), f" {unit}".rstrip())
    )

    sign = "+" if min(edges) < 0 else ""  # a band about 0 reads -1 to +1

    def at(x: float) -> str:
        return f"{scale * x:{sign}.4g}{suffix}"

    def gap(x: float) -> str:
        return f"{scale * x:.3g}{gap_unit}"

    band = f"[{scale * edges[0]:{sign}.4g}, {scale * edges[1]:{sign}.4g}]{suffix}"
    if not (math.isfinite(low) and math.isfinite(high)):
        return "inconclusive", "no confidence interval"
    if edges[0] <= low <= high <= edges[1]:
        return "holds", f"the CI lies within {band}"
    if high < edges[0]:
        return (
            "fails",
            f"the CI lies below {band}, its top {gap(edges[0] - high)} under the lower edge",
        )
    if low > edges[1]:
        return (
            "fails",
            f"the CI lies above {band}, its bottom {gap(low - edges[1])} over the upper edge",
        )
    crossed = []
    if low < edges[0]:
        crossed.append(f"{gap(edges[0] - low)} below the lower edge ({at(edges[0])})")
    if high > edges[1]:
        crossed.append(f"{gap(high - edges[1])} above the upper edge ({at(edges[1])})")
    return (
        "inconclusive",
        f"the CI reaches {' and '.join(crossed)} of {band}: neither inside nor outside",
    )


def load_verdicts(out: Path) -> pd.DataFrame:
    """OUT/verdicts.csv, checked; a missing or malformed one is a one-line error."""
    path = Path(out) / "verdicts.csv"
    if not path.is_file():
        raise ArtifactError(f"no verdicts.csv in '{out}': run `{invocation()} compare {out}` first")
    try:
        verdicts = pd.read_csv(
            path,
            keep_default_na=False,
            na_values={"mean": [""], "ci_low": [""], "ci_high": [""], "n": [""]},
        )
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as e:
        raise ArtifactError(f"'{path}' is not a verdict table ({str(e).splitlines()[0]})") from None
    missing = [c for c in COLUMNS[:9] if c not in verdicts.columns]
    if missing:
        raise ArtifactError(
            f"'{path}' is not a verdict table: missing columns {', '.join(missing)}"
        )
    for column in COLUMNS[9:]:  # added later: a verdicts.csv written before lacks them
        if column not in verdicts.columns:
            verdicts[column] = ""
    if (verdicts["counted_in"] == "").all():  # written before counted_in: by item type
        verdicts["counted_in"] = verdicts["item_type"].map(counted_in)
    return verdicts
