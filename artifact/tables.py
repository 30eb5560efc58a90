"""What the CLI prints as tables, composed here and printed by cli.py: the summary,
one table a configuration fitted to the terminal's width, and the verdicts. Each
function yields (what to print, console.print's keyword arguments)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rich import box
from rich.markup import escape
from rich.table import Table

Printed = tuple[Any, dict[str, Any]]
PLAIN = {"markup": False, "highlight": False}


def summary(df, title: str, width: int) -> Iterator[Printed]:
    """One table per configuration, fitted to `width`: only the CI column wraps (at its
    space), so no name or number is cut; a terminal too narrow even for that gets one
    line a row. Mode 'derived' is kind 'derived' (the kind column is left to summary.csv)."""
    yield f"[bold]{escape(title)}[/]", {}
    for config_id, rows in df.groupby("config_id", sort=False):
        note = rows["note"].iloc[0]
        yield f"\n[bold]{escape(config_id)}[/]", {}
        if isinstance(note, str) and note:  # pandas reads an empty note as NaN
            yield note, PLAIN
        cells = [
            (r.mode, r.metric, f"{r.mean:.4g}" + (" noisy" if r.noisy else ""), str(r.n), r.unit)
            + ("-" if r.ci_low != r.ci_low else f"[{r.ci_low:.4g}, {r.ci_high:.4g}]",)
            for r in rows.itertuples()
        ]
        header = ("mode", "metric", "mean", "n", "unit", "95% CI")
        # every column but the CI at its widest, the CI at its longest word, 2 between columns
        need = sum(max(len(c[i]) for c in [header, *cells]) + 2 for i in range(5))
        need += max(len(word) for c in cells for word in c[5].split())
        if width < need:
            for c in cells:
                yield f"{c[0]} {c[1]} = {c[2]} {c[5]} (n {c[3]}, {c[4]})", {"markup": False}
            continue
        table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, collapse_padding=True)
        for col in header:
            table.add_column(col, no_wrap=col != "95% CI", overflow="fold")
        for c in cells:
            table.add_row(*c)
        yield table, {}


def verdicts(df, path: Path) -> Iterator[Printed]:
    """The verdicts and their tally; where nothing was judged (a CPU run), a line a
    verdict and reason, not a table of identical rows."""
    from artifact.judge.verdicts import row_kinds, tally

    if df["verdict"].isin(("not applicable", "not run")).all():
        yield f"verdicts ({path}): none of its {len(df)} rows judged ({row_kinds(df)})", {}
        counts = df.groupby(["verdict", "reason"], sort=False).size()
        for (verdict, reason), n in counts.items():
            yield f"  {n} {verdict}: {reason}", {}
        yield tally(df), {}
        return
    table = Table(title=f"verdicts ({path})")
    for col in ("figure", "item", "verdict", "reason"):
        table.add_column(col, overflow="fold")
    for r in df.itertuples():
        table.add_row(r.figure, r.item, r.verdict, r.reason)
    yield table, {}
    yield tally(df), {}


def environment(info: dict[str, Any]) -> Table:
    """`env`: this machine and its stack, a row a key."""
    table = Table(title="environment", show_header=False)
    for k, v in info.items():
        table.add_row(k, "-" if v is None else str(v))
    return table
