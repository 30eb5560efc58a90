"""Power caps that always put the machine back as they found it.

Capping changes a machine that others may share, so (docs/design.md section 3):
- nothing is changed without --allow-power-cap (`require_permission`);
- the original limits of every GPU are saved to a state file *before* the first change;
- they are restored on normal exit, on an exception, on SIGINT and on SIGTERM;
- after a hard kill (SIGKILL, power loss) `python -m artifact restore-caps` restores
  them from the state file, which is removed only once the restore succeeded.

`CapSetter` is the seam: `DeviceCapSetter` over the device layer (NVML or AMD-SMI,
artifact.measure.device) on real machines, and a fake backed by a JSON file
(ARTIFACT_FAKE_CAPS=path) for tests on machines without a GPU. Records say which
setter applied a cap.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from artifact.command import invocation
from artifact.core.errors import ArtifactError
from artifact.measure import device
from artifact.store import atomic_write_text

FAKE_ENV = "ARTIFACT_FAKE_CAPS"
NEEDS_PERMISSION = "needs --allow-power-cap"


def state_dir() -> Path:
    base = Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state")
    return base / "overlap-artifact"


def default_state_file(tag: str = "all") -> Path:
    """One file per capping process (tag it by GPU when each rank caps its own)."""
    return state_dir() / f"saved-caps-{tag}.json"


def restore_all(opener: Callable[[int], CapSetter] | None = None) -> list[str]:
    """Restore from every state file left behind (what `restore-caps` runs)."""
    done = []
    for path in sorted(state_dir().glob("saved-caps-*.json")):
        done += restore_from_file(path, opener or open_setter)
    return done


class CapSetter(Protocol):
    name: str

    def power_limit_w(self) -> float:
        """The limit a cap replaces: what is saved before it and restored after."""

    def limit_range_w(self) -> tuple[float, float]: ...

    def set_power_limit_w(self, watts: float) -> None: ...


class DeviceCapSetter:
    """Caps through the device layer (NVML or AMD-SMI): sets and restores the management limit."""

    def __init__(self, gpu: device.Device):
        self._gpu = gpu
        self.name = gpu.name

    def power_limit_w(self) -> float:
        return self._gpu.management_limit_w()

    def limit_range_w(self) -> tuple[float, float]:
        return self._gpu.limit_range_w()

    def set_power_limit_w(self, watts: float) -> None:
        self._gpu.set_power_limit_w(watts)


class FakeCapSetter:
    """A device whose limits live in a JSON file: {"<index>": {"limit_w", "range_w"}}."""

    name = "fake"

    def __init__(self, index: int, path: Path | None = None):
        self._path = Path(path or os.environ[FAKE_ENV])
        self._key = str(index)

    def _load(self) -> dict[str, Any]:
        return json.loads(self._path.read_text())

    def _update(self, **values: Any) -> None:
        # Ranks share the file: lock the read-modify-write, or one rank's change is lost.
        with open(self._path.with_suffix(".lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            state = self._load()
            state[self._key].update(values)
            atomic_write_text(self._path, json.dumps(state))

    def power_limit_w(self) -> float:
        return float(self._load()[self._key]["limit_w"])

    def limit_range_w(self) -> tuple[float, float]:
        lo, hi = self._load()[self._key]["range_w"]
        return float(lo), float(hi)

    def set_power_limit_w(self, watts: float) -> None:
        self._update(limit_w=watts)


def open_setter(index: int) -> CapSetter:
    """The setter for GPU `index`: the fake if ARTIFACT_FAKE_CAPS is set, else NVML, else AMD-SMI."""
    if os.environ.get(FAKE_ENV):
        return FakeCapSetter(index)
    try:
        return DeviceCapSetter(device.open_gpu(index))
    except device.Unavailable as e:  # no driver / no ROCm
        raise ArtifactError(f"no GPU power control on this machine ({e})") from None


def require_permission(allowed: bool) -> None:
    if not allowed:
        raise ArtifactError(f"power caps change the machine: {NEEDS_PERMISSION}")


def scaled_cap_levels(
    paper_caps_w: list[float], paper_range_w: tuple[float, float], range_w: tuple[float, float]
) -> list[float]:
    """Map the paper's A100 caps onto this GPU's allowed range, keeping their relative place.

    The paper capped a 400 W A100 (allowed 100-400 W) at 300 ... 100 W; on an H200
    (200-700 W) the same places in the range are 533 ... 200 W.
    """
    (plo, phi), (lo, hi) = paper_range_w, range_w
    return [round(lo + (c - plo) / (phi - plo) * (hi - lo), 1) for c in paper_caps_w]


@dataclass
class _Saved:
    index: int
    limit_w: float


def _save(path: Path, saved: list[_Saved], setter_name: str) -> None:
    data = {
        "setter": setter_name,
        "gpus": [{"index": s.index, "limit_w": s.limit_w} for s in saved],
    }
    atomic_write_text(path, json.dumps(data, indent=1))


def restore_from_file(
    path: Path | None = None, opener: Callable[[int], CapSetter] = open_setter
) -> list[str]:
    """Restore every GPU listed in the state file, then remove it; returns what was done."""
    path = path or default_state_file()
    if not path.is_file():
        return []
    data = json.loads(path.read_text())
    done = []
    for g in data["gpus"]:
        opener(g["index"]).set_power_limit_w(g["limit_w"])
        done.append(f"GPU {g['index']}: power limit {g['limit_w']:g} W")
    path.unlink()
    return done


@contextlib.contextmanager
def capped(
    indices: list[int],
    *,
    allowed: bool,
    power_w: float | None = None,
    state_file: Path | None = None,
    opener: Callable[[int], CapSetter] = open_setter,
) -> Iterator[list[CapSetter]]:
    """Apply a power cap to the GPUs for the duration of the block."""
    require_permission(allowed)
    state_file = state_file or default_state_file()
    if state_file.exists():
        raise ArtifactError(
            f"'{state_file}' holds limits saved by an earlier run that did not restore them; "
            f"run `{invocation()} restore-caps` first"
        )
    setters = [opener(i) for i in indices]
    if power_w is not None:
        for i, s in zip(indices, setters, strict=True):
            lo, hi = s.limit_range_w()
            if not lo <= power_w <= hi:
                raise ArtifactError(
                    f"power cap {power_w:g} W is outside GPU {i}'s range {lo:g}-{hi:g} W"
                )
    saved = [_Saved(i, s.power_limit_w()) for i, s in zip(indices, setters, strict=True)]
    _save(state_file, saved, setters[0].name if setters else "none")  # before any change

    def restore() -> None:
        for sv, s in zip(saved, setters, strict=True):
            s.set_power_limit_w(sv.limit_w)
        state_file.unlink(missing_ok=True)

    def on_signal(signum, frame):
        restore()
        signal.signal(signum, previous[signum])
        if signum == signal.SIGINT:
            raise KeyboardInterrupt
        raise SystemExit(128 + signum)

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        if power_w is not None:
            for s in setters:
                s.set_power_limit_w(power_w)
        yield setters
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if state_file.exists():
            restore()
