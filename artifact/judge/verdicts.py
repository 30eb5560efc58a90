"""verdicts.csv: the contract between compare (which writes it) and the report (which
only reads it; docs/design.md section 5)."""

from __future__ import annotations

import math
from pathlib import Path

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
COLUMNS = [
    "figure",
    "item",
    "expected",
    "tolerance",
    "mean",
    "ci_low",
    "ci_high",
    "verdict",
    "reason",
    "n",
    "ci_method",
    # the paper's item, for a reader: its statement, the metric and unit of expected /
    # mean / CI ('ratio': 0.189 is 18.9 %), measured or derived, and where in the paper
    "statement",
    "metric",
    "unit",
    "kind",
    "source",
    "item_type",  # number / claim (expected/*.yaml) or check (V1, V2: artifact.judge.validation)
    "config_id",  # a check's configuration (empty: the item spans configurations)
]


def as_sentence(text: str) -> str:
    """A reason as a sentence: capital first, full stop last (compare's and the report's)."""
    text = text.strip()
    if not text:
        return text
    return text[0].upper() + text[1:] + ("" if text.endswith((".", ")", "!", "?")) else ".")


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
    the proxy evidence where there are any (compare and the report)."""
    paper = paper_items(verdicts)["verdict"].value_counts()
    line = "paper: " + ", ".join(f"{v} {paper.get(v, 0)}" for v in VERDICTS)
    for item_type, (label, values) in OTHER_KINDS.items():
        counts = of_type(verdicts, item_type)["verdict"].value_counts()
        if not counts.empty:
            line += f"; {label}: " + ", ".join(f"{v} {counts.get(v, 0)}" for v in values)
    return line


def row_kinds(verdicts: pd.DataFrame) -> str:
    """How many rows of each kind: '26 of the paper's items, 36 negative controls, ...'."""
    parts = [f"{len(paper_items(verdicts))} of the paper's items"]
    for item_type, (label, _) in OTHER_KINDS.items():
        if n := len(of_type(verdicts, item_type)):
            parts.append(f"{n} {label}")
    return ", ".join(parts)


def equivalence(
    low: float, high: float, n: int, edges: tuple[float, float], percent: bool = False
) -> tuple[str, str]:
    """The one equivalence rule of the checks and controls (V1, V2's slopes, the negative
    controls): (verdict, why) of a 95 % CI against the band `edges`. It holds where the
    whole CI lies inside the band, fails where it lies wholly outside, and is
    inconclusive where it reaches across an edge, or with fewer than MIN_REPETITIONS
    repetitions: a wide interval is no evidence of a match. `percent` writes the band in %
    (the edges are fractions), as the rows it sits in write their CIs."""
    scale, unit = (100, " %") if percent else (1, "")
    band = f"[{scale * edges[0]:+.4g}, {scale * edges[1]:+.4g}]{unit}"
    if n < MIN_REPETITIONS:
        return (
            "inconclusive",
            f"too few repetitions to check (n = {n}; a check needs {MIN_REPETITIONS})",
        )
    if not (math.isfinite(low) and math.isfinite(high)):
        return "inconclusive", "no confidence interval"
    if edges[0] <= low <= high <= edges[1]:
        return "holds", f"the CI lies within {band}"
    if high < edges[0] or low > edges[1]:
        return "fails", f"the CI lies outside {band}"
    return "inconclusive", f"the CI reaches across an edge of {band}: neither inside nor outside"


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
    return verdicts
