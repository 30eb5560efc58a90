"""Numbers in a committed results README come from data (issue 60 item 6): every
"mean [low, high]" it quotes is a row of a committed folder's summary.csv or verdicts.csv
(as a ratio or in percent, to the digits shown), or it is one of the few quoted from a
run that was never committed, each listed here with where it came from."""

import re
from pathlib import Path

import pandas as pd

from tests.conftest import ROOT

TRIPLE = re.compile(r"([+-]?\d+\.\d+) ?%? \[([+-]?\d+\.\d+), ([+-]?\d+\.\d+)\]")
# quoted from runs whose folders were never committed: (value, low, high) -> where from
UNCOMMITTED = {
    ("+10.6", "5.9", "15.4"): "the issue's run at 68b0d17 (session 8's 'before')",
    ("+13.3", "-20.5", "+47.0"): "the issue's run at 68b0d17 (session 8's 'before')",
    ("+35.4", "-33.5", "+104.2"): "the issue's run at 68b0d17 (session 8's 'before')",
    ("+1.44", "0.80", "2.07"): "the issue's run at 68b0d17 (session 8's 'before')",
    ("-10.1", "-13.1", "-7.1"): "the issue's run at 68b0d17 (session 8's 'before')",
}


def _tables() -> pd.DataFrame:
    found = [
        pd.read_csv(f, usecols=["mean", "ci_low", "ci_high"])
        for name in ("summary.csv", "verdicts.csv")
        for f in (ROOT / "results").glob(f"**/{name}")
    ]
    return pd.concat(found).dropna()


def _matches(table: pd.DataFrame, shown: tuple[str, str, str]) -> bool:
    """Whether a row reads `shown` at the digits shown, as a ratio in % or as it is."""
    for scale in (100, 1):
        hit = pd.Series(True, index=table.index)
        for column, text in zip(("mean", "ci_low", "ci_high"), shown, strict=True):
            tol = 0.5 * 10 ** -len(text.split(".")[1]) + 1e-9
            hit &= (table[column] * scale - float(text)).abs() <= tol
        if hit.any():
            return True
    return False


def test_every_interval_a_results_readme_quotes_is_in_the_data():
    table = _tables()
    unfound = []
    for readme in sorted((ROOT / "results").glob("**/README.md")):
        for m in TRIPLE.finditer(readme.read_text()):
            shown = m.groups()
            if tuple(s.lstrip("+") for s in shown) in {
                tuple(x.lstrip("+") for x in k) for k in UNCOMMITTED
            }:
                continue
            if not _matches(table, shown):
                unfound.append(f"{readme.relative_to(ROOT)}: {m.group(0)}")
    assert not unfound, "quoted but in no committed summary or verdicts:\n" + "\n".join(unfound)


def test_the_check_finds_a_typed_number(tmp_path):
    table = pd.DataFrame({"mean": [0.1023], "ci_low": [0.0811], "ci_high": [0.1234]})
    assert _matches(table, ("+10.23", "+8.11", "+12.34"))
    assert _matches(table, ("+10.2", "+8.1", "+12.3"))
    assert not _matches(table, ("+10.2", "+8.2", "+12.3"))  # a low end typed wrong
    assert Path(ROOT / "results").is_dir()
