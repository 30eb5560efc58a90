"""Results on disk (docs/design.md section 5): atomic, resumable, with provenance.

Layout under OUT/:
    records/<figure>/<config-id>/<mode>/rep-NNN.json   one repetition each
    records/<figure>/<config-id>/stopping.json        --adaptive: its repetitions, decided once
    summary.csv, verdicts.csv, report/                  written by later stages

Every file is written to a hidden temporary file in the same folder, fsynced and then
renamed over its final name, so a reader sees either the whole file or no file: a
writer killed mid-write leaves only a `.*.tmp` file, which readers ignore and
`RunStore.clean_partial` removes. Resume is by presence: a repetition whose record
exists is finished and is not run again.
"""

from __future__ import annotations

import errno
import json
import math
import os
import re
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from artifact import env as envmod
from artifact.core.errors import ArtifactError

SCHEMA_VERSION = 1
# a figure's log (OUT/logs/FIG.log): launch.torchrun writes these lines, report.runtime reads them
RUN_HEADER = "==== run:"  # starts each run's part of a figure's log
RUN_END = "==== ended:"  # ends it: how the ranks ended and the run's wall time, start-up in
STOPPING = "stopping.json"  # an adaptive configuration's decision, beside its mode folders
UMASK = os.umask(0o022)  # read the process's umask (only way to read it) ...
os.umask(UMASK)  # ... and put it back
_SAFE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._=+-]*$")


class NoSpace(ArtifactError):
    """A write ran out of disk space (ENOSPC): one line naming the file and the space."""


def atomic_write(path: Path, write: Callable[[IO[str]], object]) -> None:
    """Call write(file) on a hidden temporary file, then rename it to `path` (never half-seen)."""
    tmp = ""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        os.fchmod(fd, 0o666 & ~UMASK)  # mkstemp's 0600 would hide results from other uids
        with os.fdopen(fd, "w") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as e:
        written = Path(tmp).stat().st_size if tmp and Path(tmp).exists() else 0
        if tmp:
            Path(tmp).unlink(missing_ok=True)
        if e.errno == errno.ENAMETOOLONG:
            raise ArtifactError(
                f"cannot write '{path}': {e.strerror}; give a shorter --out"
            ) from None
        if e.errno != errno.ENOSPC:
            raise
        if not tmp or not written and free_inodes(path.parent) == 0:
            raise NoSpace(
                f"no file can be created in '{path.parent}': the file system has no free "
                "inodes left; remove files there or give another --out (finished repetitions "
                "are kept)"
            ) from None
        free = os.statvfs(path.parent).f_bavail * os.statvfs(path.parent).f_frsize
        raise NoSpace(
            f"no space left writing '{path}': it ran out after {written} bytes with "
            f"{free} bytes free; free at least {max(written, 1 << 20)} bytes and re-run "
            "(finished repetitions are kept)"
        ) from None
    except BaseException:
        if tmp:
            Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write(path, lambda f: f.write(text))


def strict_json(obj: Any) -> Any:
    """NaN and infinities -> None, so every file is strict JSON (jq and browsers read it)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: strict_json(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [strict_json(v) for v in obj]
    return obj


def dump_json(obj: Any, f: IO[str]) -> None:
    json.dump(strict_json(obj), f, indent=1, sort_keys=True, default=str, allow_nan=False)


def check_not_a_file(out: Path) -> None:
    """A one-line ArtifactError where `out`, or a folder above it, is a regular file:
    mkdir's own words ("File exists", "Not a directory") do not say which path is wrong."""
    for p in (out, *out.parents):
        if p.exists() and not p.is_dir():
            what = f"'{out}' is a file" if p == out else f"'{out}' lies under '{p}', a file"
            raise ArtifactError(
                f"--out {what}, not a folder: give a new folder or a run's results folder"
            )


def ensure_writable(out: Path) -> Path:
    """Create `out` if needed and prove it is writable, or raise a one-line ArtifactError."""
    check_not_a_file(out)
    try:
        out.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=out, prefix=".write-probe.")
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise ArtifactError(f"cannot write to output folder '{out}': {e.strerror}") from None
    return out


def _existing(folder: Path) -> Path:
    """`folder`'s nearest existing folder (a name too long to look up counts as absent)."""
    folder = Path(folder).absolute()
    while folder != folder.parent:
        try:
            if folder.exists():
                break
        except OSError:  # ENAMETOOLONG: check_path says so
            pass
        folder = folder.parent
    return folder


def free_inodes(folder: Path) -> int | None:
    """Files this user may still create under `folder` (None: the file system does not
    count them, as some network and FUSE ones do not)."""
    st = os.statvfs(_existing(folder))
    return st.f_favail if st.f_files else None


# the files a run writes, a generous count for the preflight: records, traces, logs, status
FREE_INODES_FLOOR = 2000
# the longest path a run writes under its folder (records/FIG/CONFIG/PHASE/rep-NNN.json with
# the longest configuration ids and phases), so a folder that leaves less fails here
LONGEST_INSIDE = 160
# characters the compilers' and torchrun's command lines cannot carry in a path
BAD_PATH_CHARS = ('"', "\\", "\n")


def check_path(out: Path) -> None:
    """Refuse an output folder no run can write, in one line, before anything is written:
    characters the tools cannot quote, a path or a name longer than the file system takes,
    no free inodes."""
    text = str(out)
    if bad := [c for c in BAD_PATH_CHARS if c in text]:
        shown = " ".join(repr(c) for c in bad)
        raise ArtifactError(
            f'--out {text!r} holds {shown}; accepted: a path without " \\ or a newline (the '
            "compilers' and torchrun's command lines cannot carry them)"
        )
    existing = _existing(out)
    name_max = os.pathconf(existing, "PC_NAME_MAX")
    path_max = os.pathconf(existing, "PC_PATH_MAX")
    if long := [c for c in Path(out).parts if len(c.encode()) > name_max]:
        raise ArtifactError(
            f"--out has a name of {len(long[0].encode())} bytes ({long[0][:40]}...); accepted: "
            f"names of at most {name_max} bytes on this file system"
        )
    full = len(str(Path(out).absolute()).encode())
    if full + LONGEST_INSIDE > path_max:
        raise ArtifactError(
            f"--out is {full} bytes long and a run writes paths up to {LONGEST_INSIDE} bytes "
            f"below it; accepted: a path of at most {path_max - LONGEST_INSIDE} bytes here"
        )
    inodes = free_inodes(out)
    if inodes is not None and inodes < FREE_INODES_FLOOR:
        raise ArtifactError(
            f"the file system of '{out}' has {inodes} free inodes (files it can still create); "
            f"a run needs {FREE_INODES_FLOOR} or more: remove files there or give another --out"
        )


def free_bytes(folder: Path) -> int:
    """Space this user may still write under `folder` (its nearest existing parent)."""
    st = os.statvfs(_existing(folder))
    return st.f_bavail * st.f_frsize


# Beyond the plan's records and traces: logs, status, plan.json, summary.csv, verdicts.csv
FREE_FLOOR = 1 << 20


def check_space(out: Path, need: int | None, what: str, free: int | None = None) -> None:
    """Refuse a run the folder cannot hold, before any rank starts: `need` is the plan's
    disk estimate of what is still to write (None: not known, the floor alone)."""
    from artifact.core.units import size

    free = free_bytes(out) if free is None else free
    total = (need or 0) + FREE_FLOOR
    if free < total:
        estimate = f"the plan estimates {size(need)} for {what}, " if need else ""
        raise ArtifactError(
            f"not enough space in '{out}': {size(free)} free; {estimate}"
            f"{size(total)} with logs and tables; free some space, or give another --out"
        )


def stale_summary(out: Path) -> int:
    """How many records are newer than OUT/summary.csv (0: none, or no summary)."""
    summary = Path(out) / "summary.csv"
    if not summary.is_file():
        return 0
    at = summary.stat().st_mtime_ns
    return sum(p.stat().st_mtime_ns > at for p in Path(out).glob("records/**/rep-*.json"))


def commits(out: Path) -> list[str]:
    """Every git commit the folder's records name, in order of first appearance."""
    found: dict[str, None] = {}
    for path in sorted(Path(out).glob("records/**/rep-*.json")):
        try:  # read as text: a record is written with sorted keys, one a line
            m = _COMMIT.search(path.read_text(errors="replace"))
        except OSError:
            continue
        if m:
            found[m.group(1)] = None
    return list(found)


_COMMIT = re.compile(r'"git_commit": "([^"]+)"')

PLAN = "plan.json"  # the folder's plan (artifact/launch/runplan.py writes it)


def read_plan(out: Path) -> dict[str, Any] | None:
    path = Path(out) / PLAN
    if not path.is_file():
        return None
    try:
        plan = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise ArtifactError(f"{path}: not valid JSON ({e.msg} at line {e.lineno})") from None
    if not isinstance(plan, dict) or "figures" not in plan:
        raise ArtifactError(
            f"{path}: not a folder's plan (a mapping with figures); delete it and run again: "
            "the records are kept, and the next run writes the plan anew"
        )
    return plan


def planned_reps(out: Path) -> dict[str, int]:
    """figure -> repetitions its plan asks for (empty without a plan)."""
    plan = read_plan(out)
    return {f: v["reps"] for f, v in plan["figures"].items()} if plan else {}


def default_out_dir(preset: str, root: Path | None = None) -> Path:
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    return (root or envmod.REPO_ROOT / "results") / f"{stamp}-{preset}"


def _check_id(kind: str, value: str) -> str:
    if not _SAFE_ID.match(value):
        raise ArtifactError(f"{kind} {value!r} is not a safe folder name (letters, digits, ._=+-)")
    return value


class RunStore:
    """One output folder: its records and its tables."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self.records_dir = self.root / "records"

    def record_path(self, figure: str, config_id: str, mode: str, rep: int) -> Path:
        return (
            self.records_dir
            / _check_id("figure", figure)
            / _check_id("config id", config_id)
            / _check_id("mode", mode)
            / f"rep-{rep:03d}.json"
        )

    def stopping_path(self, figure: str, config_id: str) -> Path:
        """Where an adaptive configuration's decision lies (artifact.rank.adaptive)."""
        return self.records_dir / _check_id("figure", figure) / _check_id("config id", config_id) / STOPPING  # fmt: skip

    def read_stopping(self, figure: str, config_id: str) -> dict[str, Any] | None:
        """A configuration's stopping decision; None where it has none."""
        path = self.stopping_path(figure, config_id)
        return json.loads(path.read_text()) if path.is_file() else None

    def write_stopping(self, figure: str, config_id: str, decision: dict[str, Any]) -> Path:
        path = self.stopping_path(figure, config_id)
        atomic_write(path, lambda f: dump_json(decision, f))
        return path

    def stopping(self, figure: str | None = None) -> dict[tuple[str, str], dict[str, Any]]:
        """(figure, config id) -> its stopping decision, for every adaptive configuration."""
        base = self.records_dir / figure if figure else self.records_dir
        found = sorted(base.glob(f"**/{STOPPING}"))
        return {(p.parent.parent.name, p.parent.name): json.loads(p.read_text()) for p in found}

    def has(self, figure: str, config_id: str, mode: str, rep: int) -> bool:
        return self.record_path(figure, config_id, mode, rep).is_file()

    def write_record(
        self,
        *,
        figure: str,
        config_id: str,
        config: dict[str, Any],
        mode: str,
        rep: int,
        metrics: dict[str, float],
        units: dict[str, str],
        provenance: dict[str, Any],
        extra: dict[str, Any] | None = None,
    ) -> Path:
        missing = sorted(set(metrics) - set(units))
        if missing:
            raise ArtifactError(f"metrics without a unit: {', '.join(missing)}")
        stamp = {"mode": mode, "rep": rep, "timestamp": datetime.now(UTC).isoformat()}
        record = Record(
            figure=figure,
            config_id=config_id,
            config=config,
            mode=mode,
            rep=rep,
            metrics=metrics,
            units=units,
            provenance={**provenance, **stamp},
        ).to_json() | (extra or {})  # the other keys as given (per_rank, timed, ...)
        path = self.record_path(figure, config_id, mode, rep)
        # Serialised straight into the temporary file: no second copy of a large record.
        atomic_write(path, lambda f: dump_json(record, f))
        return path

    def _record_paths(self, figure: str | None = None, config_id: str | None = None) -> list[Path]:
        """The finished records' files (sorted), of a figure or one of its configurations;
        temporary files are never among them."""
        base = self.records_dir / figure if figure else self.records_dir
        base = base / config_id if figure and config_id else base
        return sorted(base.glob("**/rep-*.json"))

    def records(self, figure: str | None = None, config_id: str | None = None) -> list[dict[str, Any]]:  # fmt: skip
        """All finished records (sorted by path), of a figure or one of its configurations."""
        return [read_record(path) for path in self._record_paths(figure, config_id)]

    def readable_records(self, figure: str | None = None) -> list[dict[str, Any]]:
        """records(figure) less the files that do not read as a record (cut short, or of
        another shape): for a reader that only counts them (the report's run times)."""
        out = []
        for path in self._record_paths(figure):
            try:
                out.append(read_record(path))
            except (OSError, ValueError, ArtifactError):  # ValueError: not UTF-8
                continue
        return out

    def record_count(self, figure: str | None = None) -> int:
        """How many finished records a figure (or the folder) has on disk; none is read."""
        return len(self._record_paths(figure))

    def finished(self, figure: str, reps: int, processes: int) -> bool:
        """Whether a run with this plan (`reps`, `processes`) already finished `figure`.

        True only when its status is 'ran' (or 'not run': this machine cannot run it, as
        the ranks found) with the stamp the ranks write at the end of a
        whole run (`finished`: repetitions, processes, records), for the same repetitions
        and processes, with no configuration 'failed' (a resume runs those again) and
        every record it counted still on disk. Then the ranks would find every repetition
        on disk and skip it, so the CLI need not start them."""
        status = self.status().get(figure, {})
        stamp = status.get("finished")
        return (
            status.get("status") in ("ran", "not run")
            and isinstance(stamp, dict)
            and stamp.get("reps") == reps
            and stamp.get("processes") == processes
            and not any(c.get("status") == "failed" for c in status.get("configs", {}).values())
            and self.record_count(figure) >= stamp.get("records", float("inf"))
        )

    def clean_partial(self) -> int:
        """Remove temporary files a killed writer left behind; returns how many."""
        leftovers = list(self.root.glob("**/.*.tmp"))
        for p in leftovers:
            p.unlink(missing_ok=True)
        return len(leftovers)

    def _status_path(self, figure: str) -> Path:
        return self.root / "status" / f"{_check_id('figure', figure)}.json"

    def write_status(self, figure: str, status: str, reason: str, **details: Any) -> Path:
        """OUT/status/<figure>.json: whether a figure ran, and why not (read by compare/report).

        Statuses: 'running' (written when a run starts: a run killed before it ends leaves
        it), 'ran', 'not run' (the machine cannot run it, or it is opt-in) and 'failed'.
        The per-configuration entries (`configs`) are kept unless `details` replaces them.
        """
        path = self._status_path(figure)
        old = self.status().get(figure, {})
        body = {"figure": figure, "status": status, "reason": reason, **details}
        if "configs" not in details and old.get("configs"):
            body["configs"] = old["configs"]
        try:
            atomic_write(path, lambda f: dump_json(body, f))
        except NoSpace:
            # a full disk: the old status (a `running` that is no longer true) gives its
            # block back to the new one, read above; once more, then the error stands
            path.unlink(missing_ok=True)
            atomic_write(path, lambda f: dump_json(body, f))
        return path

    def write_config_status(self, figure: str, config_id: str, status: str, reason: str) -> Path:
        """Record that one configuration of `figure` did not run ('not run' or 'failed'), and why."""
        body = self.status().get(figure) or {"figure": figure, "status": "running", "reason": ""}
        body.setdefault("configs", {})[_check_id("config id", config_id)] = {
            "status": status,
            "reason": reason,
        }
        path = self._status_path(figure)
        atomic_write(path, lambda f: dump_json(body, f))
        return path

    def status(self) -> dict[str, dict[str, Any]]:
        out = {}
        for p in sorted(self.root.glob("status/*.json")):
            try:
                status = json.loads(p.read_text())
            except json.JSONDecodeError as e:
                raise ArtifactError(f"{p}: not valid JSON ({e.msg} at line {e.lineno})") from None
            if not isinstance(status, dict) or not {"status", "reason"} <= set(status):
                raise ArtifactError(
                    f"{p}: not a figure's status (a mapping with status and reason); delete it "
                    f"and run `{p.stem}` again (its records are kept and not measured again)"
                )
            out[p.stem] = status
        return out

    def write_text(self, name: str, text: str) -> Path:
        path = self.root / name
        atomic_write_text(path, text)
        if name in DERIVED:  # its digest, so a damaged copy is known before it is trusted
            digests = read_digests(self.root)
            digests[name] = _sha256(text.encode())
            atomic_write_text(self.root / DIGESTS, json.dumps(digests, indent=1, sort_keys=True))
        return path


def read_record(path: Path) -> dict[str, Any]:
    """One record, checked through Record: a file cut short or of another shape is a
    one-line error that names it and how to measure that repetition again."""
    again = "delete it and re-run to measure that repetition again"
    try:
        record = json.loads(Path(path).read_text())
    except json.JSONDecodeError as e:
        raise ArtifactError(
            f"{path}: not a valid record ({e.msg} at line {e.lineno}); {again}"
        ) from None
    try:
        return Record.from_json(record).to_json()
    except NotARecord as e:
        raise ArtifactError(f"{path}: {e}; {again}") from None


# what every record holds (RunStore.write_record); a file without them is no record
RECORD_KEYS = frozenset({"figure", "config_id", "mode", "rep", "metrics", "config", "provenance"})


class NotARecord(ArtifactError):
    """A mapping without every key of RECORD_KEYS: one line naming those it lacks."""


def record_lacks(obj: Any) -> list[str]:
    """The keys of RECORD_KEYS that `obj` lacks, sorted (all of them where it is no mapping)."""
    return sorted(RECORD_KEYS - set(obj) if isinstance(obj, dict) else RECORD_KEYS)


@dataclass(frozen=True)
class Record:
    """One repetition of one mode of one configuration, as records/FIG/CONFIG/MODE/rep-NNN.json
    holds it (RunStore.write_record writes it, read_record reads it).

    The first seven fields are RECORD_KEYS, in every record; the optional ones are None where
    the record lacks them (to_json leaves them out), and `extra` holds every other key, so
    `Record.from_json(d).to_json() == d` for any record `d`."""

    figure: str
    config_id: str
    mode: str  # the phase: overlap, sequential, nocomm, trace, ...
    rep: int
    config: dict[str, Any]  # the configuration's parameters, as the sweep gave them
    metrics: dict[str, Any]  # name -> value (None: NaN on disk), reduced over the ranks
    provenance: dict[str, Any]  # env.capture's, with mode, rep and timestamp
    schema: int | None = SCHEMA_VERSION
    units: dict[str, str] | None = None  # metric -> unit
    per_rank: list[dict[str, Any]] | None = None  # each rank's means
    e2e_iterations_ms: list[float] | None = None  # each timed iteration's E2E
    phase_order: list[str] | None = None  # the repetition's phases, in the order they ran
    phase_position: int | None = None  # this phase's place in phase_order
    timed: str | None = None  # "per phase" or "interleaved rounds"
    power: dict[str, Any] | None = None  # fig7's power backend and TDP
    reused_from: str | None = None  # the figure whose record this one copies
    adaptive: dict[str, Any] | None = None  # --adaptive: its pilot and stopping rule
    extra: dict[str, Any] = field(default_factory=dict)  # any other key, as written

    @classmethod
    def from_json(cls, obj: Any) -> Record:
        """A record's JSON mapping as a Record; NotARecord names the keys it lacks."""
        if lacks := record_lacks(obj):
            raise NotARecord(f"not a record (it lacks {', '.join(lacks)})")
        known, extra = {}, {}
        for k, v in obj.items():
            typed = k in _FIELDS and (k in RECORD_KEYS or v is not None)
            (known if typed else extra)[k] = v  # a null optional stays in extra, as written
        return cls(**{"schema": None, **known}, extra=extra)

    def to_json(self) -> dict[str, Any]:
        """The mapping write_record writes (the nested values are this record's own)."""
        out = {}
        for name in _FIELDS:
            value = getattr(self, name)
            if value is not None or name in RECORD_KEYS:
                out[name] = value
        return {**out, **self.extra}


_FIELDS = tuple(f.name for f in fields(Record) if f.name != "extra")


# The files later stages derive from the records (summarize, compare): each is written with
# its digest in DIGESTS, and read only where it still matches (damaged_derived)
DERIVED = ("summary.csv", "configs.json", "provenance.json", "verdicts.csv")
DIGESTS = ".digests.json"
REBUILT_BY = {
    "summary.csv": "summarize",
    "configs.json": "summarize",
    "provenance.json": "summarize",
    "verdicts.csv": "compare",
}


def _sha256(data: bytes) -> str:
    import hashlib

    return hashlib.sha256(data).hexdigest()


def read_digests(out: Path) -> dict[str, str]:
    """The digests of the derived files as written ({} where none was recorded: a folder
    from before, whose files are read as they are)."""
    try:
        data = json.loads((Path(out) / DIGESTS).read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def damaged_derived(out: Path, names: Iterable[str] = DERIVED) -> list[str]:
    """The derived files whose content is not what their stage wrote (cut short, edited)."""
    digests = read_digests(out)
    damaged = []
    for name in names:
        path = Path(out) / name
        if name in digests and path.is_file() and _sha256(path.read_bytes()) != digests[name]:
            damaged.append(name)
    return damaged


def check_derived(out: Path, names: Iterable[str] = DERIVED) -> None:
    """A one-line ArtifactError naming a damaged derived file and the command that rebuilds
    it from the records."""
    from artifact.command import invocation

    if damaged := damaged_derived(out, names):
        name = damaged[0]
        raise ArtifactError(
            f"'{Path(out) / name}' is not what `{REBUILT_BY[name]}` wrote (cut short or edited: "
            f"its digest differs); rebuild it from the records: "
            f"`{invocation()} {REBUILT_BY[name]} {out}`"
        )


def check_uniform_env(records: Iterable[dict[str, Any]], allow_mixed: bool = False) -> None:
    """Refuse to summarise records from different environments unless allow_mixed."""
    prints: dict[str, dict[str, Any]] = {}
    for r in records:
        fp = envmod.fingerprint(r["provenance"])
        prints.setdefault(json.dumps(fp, sort_keys=True, default=str), fp)
    if len(prints) <= 1 or allow_mixed:
        return
    fps = list(prints.values())
    differing = sorted(k for k in fps[0] if any(fp[k] != fps[0][k] for fp in fps[1:]))
    # every value of each, so a folder of several commits names each commit
    values = "; ".join(f"{k}: {', '.join(sorted({str(fp[k]) for fp in fps}))}" for k in differing)
    raise ArtifactError(
        f"records come from {len(fps)} environments (differ in {values}); "
        "pass --allow-mixed to summarise them together"
    )
