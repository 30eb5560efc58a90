"""verdicts.csv: the contract between compare (which writes it) and the report (which
only reads it; docs/design.md section 5)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from artifact.errors import ArtifactError

VERDICTS = ("reproduced", "not reproduced", "inconclusive", "not applicable", "not run")
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
]


def as_sentence(text: str) -> str:
    """A reason as a sentence: capital first, full stop last (compare's and the report's)."""
    text = text.strip()
    if not text:
        return text
    return text[0].upper() + text[1:] + ("" if text.endswith((".", ")", "!", "?")) else ".")


def load_verdicts(out: Path) -> pd.DataFrame:
    """OUT/verdicts.csv, checked; a missing or malformed one is a one-line error."""
    path = Path(out) / "verdicts.csv"
    if not path.is_file():
        raise ArtifactError(
            f"no verdicts.csv in '{out}': run `python -m artifact compare {out}` first"
        )
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
    return verdicts
