"""What a run shows while it runs, drawn in the CLI's process (docs/design.md section 2).

The ranks never draw on the terminal. Rank 0 writes a beacon, OUT/logs/<figure>.progress
(artifact.rank.runner.RunContext.progress): JSON with `what` it is doing and where it is
(config_k/config_n/config_id, rep_k/rep_n, phase/phase_k/phase_n). Here:
- `read_beacon` and `State`: the beacon -> figure k/N (`nox -s all` sets FIGURE_ENV),
  configuration k/N, repetition k/N, phase, elapsed time and ETA;
- `Display`: a rich Live display on a terminal; elsewhere (CI, `| tee`) plain one-line
  updates at a modest rate. It also decides which lines of the ranks' output reach the
  console (`ConsoleFilter`); every line reaches the log (artifact.launch.torchrun writes it);
- `digest`: a couple of lines a configuration once a figure has run.
Besides cli.py, the only module that prints (the Display, on the console it is given).
"""

from __future__ import annotations

import json
import math
import os
import re
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from artifact.core.errors import ArtifactError

FIGURE_ENV = "ARTIFACT_FIGURE_OF"  # "K/N": this figure's place in `nox -s all` (noxfile.py)
STARTING = "starting the ranks (torchrun, imports, process group)"
HEARTBEAT_AFTER_S = 5.0  # a step this old shows how long it has lasted ("set-up... 42 s")
POLL_S = 0.5  # how often the display reads the beacon and redraws
PLAIN_EVERY_S = 15.0  # without a terminal: at most one line this often, when something moved,
PLAIN_HEARTBEAT_S = 60.0  # and one at least this often, even when nothing did


def figure_of(environ: Mapping[str, str] = os.environ) -> tuple[int, int] | None:
    """(k, n) from FIGURE_ENV, or None when the figure runs alone."""
    raw = environ.get(FIGURE_ENV, "").strip()
    if not raw:
        return None
    m = re.fullmatch(r"(\d+)/(\d+)", raw)
    if not m or not 1 <= int(m[1]) <= int(m[2]):
        raise ArtifactError(f"{FIGURE_ENV}={raw!r} is not K/N with 1 <= K <= N (e.g. 3/9)")
    return int(m[1]), int(m[2])


def read_beacon(path: Path) -> dict[str, Any]:
    """Rank 0's last beacon; {} before the first. A plain-text beacon (written before the
    beacon had fields) is its `what`."""
    try:
        text = path.read_text().strip()
    except OSError:
        return {}
    try:
        beacon = json.loads(text) if text else {}
    except ValueError:
        return {"what": text}
    return beacon if isinstance(beacon, dict) else {"what": text}


def clock(seconds: float) -> str:
    s = int(seconds)
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"


def _count(beacon: Mapping[str, Any], key: str) -> int | None:
    """A k or N field as an int (None when absent, null or not a count)."""
    value = beacon.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


@dataclass
class State:
    """Where a figure's run is, from the beacons seen so far, on the caller's clock (seconds;
    the display passes time.monotonic()). The unit of work is one repetition of one
    configuration; a phase counts as its share of its repetition."""

    figure: str
    reps: int  # repetitions a configuration, as the run asks (the beacon's rep_n when it has one)
    started: float  # when the ranks were launched
    figure_of: tuple[int, int] | None = None
    beacon: dict[str, Any] = field(default_factory=dict)
    since: float | None = None  # when `what` last changed
    first: tuple[float, float] | None = None  # (when, units done) at the first repetition seen

    def update(self, beacon: dict[str, Any], now: float) -> None:
        if self.since is None or beacon.get("what") != self.beacon.get("what"):
            self.since = now
        self.beacon = beacon
        done = self.done()
        if self.first is None and _count(beacon, "rep_k") and done is not None:
            # repetitions finished before this point were on disk already (a resumed run),
            # or took the start-up with them: the rate is measured from here
            self.first = (now, done)

    def reps_n(self) -> int:
        return _count(self.beacon, "rep_n") or self.reps

    def total(self) -> int | None:
        n = _count(self.beacon, "config_n")
        return None if n is None else n * self.reps_n()

    def done(self) -> float | None:
        """Units finished: earlier configurations, earlier repetitions, earlier phases."""
        b = self.beacon
        config_k, rep_k = _count(b, "config_k"), _count(b, "rep_k")
        if config_k is None:
            return None
        done = float((config_k - 1) * self.reps_n())
        if rep_k:
            phase_k, phase_n = _count(b, "phase_k") or 1, _count(b, "phase_n") or 1
            done += rep_k - 1 + (phase_k - 1) / phase_n
        return done

    def eta_s(self, now: float) -> float | None:
        """Seconds left: the units left at the rate measured since the first repetition."""
        done, total = self.done(), self.total()
        if self.first is None or done is None or total is None:
            return None
        t0, u0 = self.first
        if done <= u0:
            return None
        return (now - t0) * (total - done) / (done - u0)

    def where(self) -> list[str]:
        """figure k/N, configuration k/N (and its id), repetition k/N, phase k/N."""
        b = self.beacon
        parts = [
            self.figure + (f" ({self.figure_of[0]}/{self.figure_of[1]})" if self.figure_of else "")
        ]
        if (k := _count(b, "config_k")) is not None:
            parts.append(f"config {k}/{b.get('config_n')} {b.get('config_id', '')}".rstrip())
        if (k := _count(b, "rep_k")) is not None:
            upto = "up to " if b.get("rep_upto") else ""  # an adaptive pilot: not decided yet
            parts.append(f"rep {k}/{upto}{self.reps_n()}")
        if (k := _count(b, "phase_k")) is not None and b.get("phase"):
            parts.append(f"phase {k}/{b.get('phase_n')} {b['phase']}")
        return parts

    def doing(self, now: float) -> str:
        """What rank 0 does, without the configuration's id; how long, once it lasts."""
        what = str(self.beacon.get("what") or STARTING)
        # "cfg-overlap: timed iteration 3/10" -> "timed iteration 3/10": where() names both
        for shown in (self.beacon.get("config_id"), self.beacon.get("phase")):
            if shown and what.startswith(str(shown)):
                what = what[len(str(shown)) :].lstrip(":- ") or "starting"
        lasted = now - (self.since if self.since is not None else self.started)
        return what + (f"… {lasted:.0f} s" if lasted >= HEARTBEAT_AFTER_S else "")

    def times(self, now: float) -> str:
        eta = self.eta_s(now)
        left = "ETA -" if eta is None else f"ETA {clock(eta)}"
        return f"{clock(now - self.started)} elapsed, {left}"

    def line(self, now: float) -> str:
        """The plain one-line form (no terminal)."""
        return " · ".join([*self.where(), self.doing(now), self.times(now)])

    def render(self, now: float) -> RenderableType:
        """The live form: where, a bar with elapsed time and ETA, and what rank 0 does."""
        done, total = self.done(), self.total()
        bar = Table.grid(padding=(0, 1))
        pct = "" if done is None or not total else f"{100 * done / total:3.0f} %"
        bar.add_row(
            ProgressBar(total=total if done is not None else None, completed=done or 0, width=40),
            pct,
            self.times(now),
        )
        head = Text(" · ".join(self.where()), style="bold")
        return Group(head, bar, Text(self.doing(now), style="dim"))

    def key(self) -> tuple:
        """What counts as moving on, for the plain lines' pace."""
        b = self.beacon
        step = re.sub(r"\d+", "#", str(b.get("what", "")))
        return (b.get("config_k"), b.get("rep_k"), b.get("phase_k"), step)


# Lines of the ranks' output that go to the log only: profiler and library chatter.
_NOISE = re.compile(
    "|".join(
        (
            r"USDT:",  # kineto's and NCCL's USDT probes (profiler_start / profiler_stop)
            r"^STAGE:",  # kineto's profiler stages (older torch)
            r"\*{5,}\s*$",  # torchrun's banner about OMP_NUM_THREADS ...
            r"Setting OMP_NUM_THREADS environment variable",  # ... and its text
            r"^\[rank \d+\] (?:DEBUG|INFO) (?!artifact\.)",  # libraries' info (Megatron, ...)
            r"^\[rank \d+\] INFO artifact\.\S+: \S+ rep \d+",  # a repetition's numbers (summary.csv)
            r"^\[[\d\-: ,.]+\] \[(?:DEBUG|INFO)\]",  # DeepSpeed's own logger
            r"^DeepSpeed \S+ built successfully",  # DeepSpeed's CPU op, and its build steps:
            r"^(?:Using \S+ as PyTorch extensions root|Creating extension directory"
            r"|Emitting ninja build file|Building extension module|Allowing ninja to set"
            r"|Loading extension module|Time to load \S+ op|ninja: no work to do)",
            r"^\[\d+/\d+\] \S*(?:c\+\+|g\+\+|gcc|clang|nvcc|hipcc)\s",  # ninja's compile lines
        )
    )
)
# A Python warning raised in library code ("/.../torch/profiler/profiler.py:224: UserWarning:
# ..."), and the source line printed below it; the artifact's own warnings reach the console.
_LIBRARY_WARNING = re.compile(r"^(?!.*/artifact/)\S+\.py:\d+: \w*Warning: ")


class ConsoleFilter:
    """Which lines of the ranks' output the console shows: everything but the noise above
    (errors, tracebacks, warnings, the artifact's own messages); blank lines never."""

    def __init__(self) -> None:
        self.hidden = 0  # non-blank lines kept from the console (they are in the log)
        self._in_warning = False

    def __call__(self, line: str) -> bool:
        text = line.rstrip("\n")
        if not text.strip():
            return False
        if self._in_warning and text[:1].isspace():  # the warning's source line
            self.hidden += 1
            return False
        self._in_warning = bool(_LIBRARY_WARNING.match(text))
        if self._in_warning or _NOISE.search(text):
            self.hidden += 1
            return False
        return True


class Display:
    """The live progress of one figure's run, on `console` (the CLI's stderr), while the
    ranks run; `echo(line)` is where the launcher sends each line of their output.

    On a terminal: a rich Live display redrawn every POLL_S, the ranks' shown lines above
    it. Otherwise: the same shown lines, and a plain progress line when the run moved on
    (at most every PLAIN_EVERY_S) or at least every PLAIN_HEARTBEAT_S. `debug` shows
    every line of the ranks' output."""

    def __init__(self, console: Console, state: State, beacon: Path, log: Path, debug: bool):
        self.console, self.state, self.beacon, self.log = console, state, beacon, log
        self.filter = ConsoleFilter()
        self.debug = debug
        self._live: Live | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._mtime: float | None = None
        self._printed: tuple[float, tuple] | None = None  # (when, key) of the last plain line

    def __enter__(self) -> Display:
        if self.console.is_terminal:
            self._live = Live(
                console=self.console, auto_refresh=False, transient=True, redirect_stdout=False
            )
            self._live.start()
        self.tick(time.monotonic())
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        if self._live is not None:
            self._live.stop()
        hidden = self.filter.hidden
        self.console.print(
            f"log: {self.log} (the ranks' whole output"
            + (
                f"; {hidden} line(s) of profiler and library output shown only there"
                if hidden
                else ""
            )
            + ")",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )

    def echo(self, line: str) -> None:
        if self.debug or self.filter(line):
            self.console.print(
                line.rstrip("\n"), markup=False, highlight=False, emoji=False, soft_wrap=True
            )

    def _poll(self) -> None:
        while not self._stop.wait(POLL_S):
            self.tick(time.monotonic())

    def tick(self, now: float) -> None:
        """Read the beacon when it changed, and redraw (or print a plain line when due)."""
        try:
            mtime = self.beacon.stat().st_mtime
        except OSError:
            mtime = None
        if mtime != self._mtime:
            self._mtime = mtime
            self.state.update(read_beacon(self.beacon), now)
        if self._live is not None:
            self._live.update(self.state.render(now), refresh=True)
        elif plain_line_due(self._printed, self.state.key(), now):
            self._printed = (now, self.state.key())
            self.console.print(self.state.line(now), markup=False, highlight=False, soft_wrap=True)


def plain_line_due(printed: tuple[float, tuple] | None, key: tuple, now: float) -> bool:
    """Without a terminal: the first line at once; then a line when the run moved on and
    PLAIN_EVERY_S have passed, or when PLAIN_HEARTBEAT_S have passed in any case."""
    if printed is None:
        return True
    when, last_key = printed
    return (key != last_key and now - when >= PLAIN_EVERY_S) or now - when >= PLAIN_HEARTBEAT_S


# --- after a figure: a couple of lines a configuration (the whole table is summary.csv) ---

# Eq. 1 beside its A/A noise floor (two identical overlap passes; artifact/analyze/noise.py)
EQ1 = {"slowdown": "Eq. 1 slowdown", "noise_floor": "noise floor (A/A)"}


def _with_ci(row: Any) -> str:
    """A ratio as a signed percentage with its 95 % CI, flagged when noisy."""
    text = f"{row.mean:+.1%}"
    if math.isnan(row.ci_low):
        text += " (no CI at n = 1)" if row.n <= 1 else " (no CI)"
    else:
        text += f" [95% CI {row.ci_low:+.1%}, {row.ci_high:+.1%}]"
    return text + (" noisy" if row.noisy else "")


def digest(summary: Any) -> list[str]:
    """A couple of lines a configuration of summary.csv's rows: its id and repetitions;
    E2E overlap vs sequential and Eq. 1 with its CI; power, where it was measured."""
    lines = []
    for config_id, rows in summary.groupby("config_id", sort=False):
        row = {(r.mode, r.metric): r for r in rows.itertuples()}
        timing, power = [], []
        overlap, sequential = row.get(("overlap", "e2e_ms")), row.get(("sequential", "e2e_ms"))
        if overlap is not None and sequential is not None:
            timing.append(
                f"E2E overlap {overlap.mean:.4g} ms vs sequential {sequential.mean:.4g} ms"
            )
        timing += [
            f"{label} {_with_ci(row['derived', m])}"
            for m, label in EQ1.items()
            if ("derived", m) in row
        ]
        if (mean := row.get(("derived", "mean_power_increase"))) is not None:
            power.append(f"mean power, overlap vs sequential {_with_ci(mean)}")
        blocks = [row.get(("trace", f"block_{m}_pct_tdp")) for m in ("overlap", "sequential")]
        if None not in blocks:  # fig7's power trace
            power.append(
                f"power, % of TDP: overlap block {blocks[0].mean:.0f} vs sequential {blocks[1].mean:.0f}"
            )
        lines.append(f"{config_id} (n = {int(rows['n'].max())})")
        lines += ["  " + "; ".join(part) for part in (timing, power) if part]
        if not timing + power:
            lines.append("  no headline number: see summary.csv")
    return lines
