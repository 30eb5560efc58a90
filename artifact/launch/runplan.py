"""A results folder's plan: what was asked of it, so a resumed run continues exactly that.

OUT/plan.json holds the preset, the device, the environment's fingerprint and, per
figure, the repetitions and options of its first run. `run FIG --out DIR` with no other
flags continues that plan ("resuming: k of n repetitions done"); a different plan is
refused in one line naming the difference, except an explicit larger `--reps`, which
extends the plan and says so. summarize counts only the repetitions a plan asks for
(store.planned_reps: the folder's reader, below the run).

Also here: the check that a figure takes the options a run sets (its spec's `options`;
anything else is refused in one line).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from artifact.core.errors import ArtifactError
from artifact.core.options import RunOptions, flag_of
from artifact.figures import spec_of
from artifact.store import PLAN, atomic_write_text, read_plan, strict_json


def foreign_options(figure: str, options: RunOptions) -> list[str]:
    """The flags set in `options` that `figure` does not take."""
    return [flag_of(k) for k in options.given() if k not in spec_of(figure).options]


def check_options(figure: str, options: RunOptions) -> None:
    spec = spec_of(figure)
    foreign = foreign_options(figure, options)
    for key in options.given():
        if key in spec.why_not:
            raise ArtifactError(spec.why_not[key])
    if foreign:
        takes = ", ".join(sorted(flag_of(k) for k in spec.options)) or "none"
        raise ArtifactError(f"{figure} does not take {', '.join(foreign)}; it takes: {takes}")


def _plain(obj: Any) -> Any:
    """`obj` as plan.json holds it (strict JSON), so a fresh value compares with a stored one."""
    return json.loads(json.dumps(strict_json(obj), default=str))


def _flag(name: str) -> str:
    """The flag of an option a plan holds (one an older version wrote may be unknown now)."""
    try:
        return flag_of(name)
    except StopIteration:
        return name


def _differing(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    return sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))


def reconcile(
    out: Path,
    *,
    figure: str,
    preset: str,
    device: str,
    fingerprint: dict[str, Any],
    reps: int | None,
    default_reps: int,
    options: RunOptions,
) -> tuple[int, str | None]:
    """(the repetitions to run, a line to print) after checking the folder's plan.

    Writes nothing; `record` writes the plan once the run is accepted."""
    plan = read_plan(out)
    if plan is None:
        return reps or default_reps, None
    for key, have, want in (("preset", plan["preset"], preset), ("device", plan["device"], device)):
        if have != want:
            raise ArtifactError(
                f"'{out}' holds a {key} {have!r} run; this one is {want!r}: use another --out"
            )
    differ = _differing(_plain(fingerprint), plan["fingerprint"])
    if differ:
        raise ArtifactError(
            f"'{out}' was measured in another environment (differs in: {', '.join(differ)}); "
            "use another --out, or `summarize --allow-mixed` to combine folders on purpose"
        )
    fig = plan["figures"].get(figure)
    if fig is None:
        return reps or default_reps, None
    changed = _differing(options.as_json(), fig["options"])
    if changed:
        raise ArtifactError(
            f"'{out}' ran {figure} with other options ({', '.join(_flag(k) for k in changed)}: "
            f"{ {k: fig['options'].get(k) for k in changed} } before); use another --out"
        )
    if reps is None or reps == fig["reps"]:
        return fig["reps"], f"resuming {figure}: its plan asks for {fig['reps']} repetitions"
    if reps < fig["reps"]:
        raise ArtifactError(
            f"'{out}' plans {fig['reps']} repetitions of {figure}; --reps {reps} would leave "
            f"some out: give --reps {fig['reps']} or more, or another --out"
        )
    return reps, f"extending {figure}'s plan from {fig['reps']} to {reps} repetitions"


def record(
    out: Path,
    *,
    figure: str,
    preset: str,
    device: str,
    fingerprint: dict[str, Any],
    reps: int,
    options: RunOptions,
    nproc: int,
) -> None:
    plan = read_plan(out) or {
        "preset": preset,
        "device": device,
        "fingerprint": _plain(fingerprint),
        "figures": {},
    }
    plan["figures"][figure] = {
        "reps": reps,
        "options": options.as_json(),
        "processes": nproc,
    }
    atomic_write_text(Path(out) / PLAN, json.dumps(plan, indent=1, sort_keys=True))
