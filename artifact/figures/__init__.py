"""The figure registry: every experiment of the artifact, one declarative file each.

    from artifact.figures import spec_of, REGISTRY
    spec_of("fig8").derived      # what summary.csv derives for it
    spec_of("fig5").records      # "fig4": drawn from fig4's records

Importing this package imports no torch (summarize, compare, plan and the report use it).
"""

from __future__ import annotations

import importlib
import importlib.util
import os
from pathlib import Path

from artifact.core.errors import ArtifactError, bad_choice
from artifact.figures.names import figure_names
from artifact.figures.spec import FigureSpec, Panel, Series

# A folder of more figures, each a spec file (and its expected YAML, which compare reads
# beside expected/'s): a figure tried out without touching the package
EXTRA_ENV = "ARTIFACT_FIGURES_DIR"


def extra_dir() -> Path | None:
    value = os.environ.get(EXTRA_ENV)
    return Path(value) if value else None


def load_folder(folder: Path) -> dict[str, FigureSpec]:
    """The specs of a folder's figure files (names.figure_names), loaded by path."""
    if not Path(folder).is_dir():
        raise ArtifactError(
            f"{EXTRA_ENV}={str(folder)!r} is not a folder; accepted: a folder of figure files "
            "(artifact/figures/fig8.py is one), or the variable unset"
        )
    specs = {}
    for name in figure_names(Path(folder)):
        path = Path(folder) / f"{name}.py"
        loader = importlib.util.spec_from_file_location(f"_figure_{name}", path)
        module = importlib.util.module_from_spec(loader)
        try:
            loader.loader.exec_module(module)
        except Exception as e:  # a figure file is user code: any error is its own
            where = f" at line {e.lineno}" if isinstance(e, SyntaxError) else ""
            raise ArtifactError(
                f"{path}: does not import ({type(e).__name__}{where}: "
                f"{str(e).splitlines()[0] if str(e) else ''}); fix it or move it out of "
                f"{EXTRA_ENV}"
            ) from None
        spec = getattr(module, "SPEC", None)
        if not isinstance(spec, FigureSpec):
            raise ArtifactError(
                f"{path}: defines no SPEC (a FigureSpec, as artifact/figures/fig8.py does); "
                "accepted: a figure file with SPEC = FigureSpec(...)"
            )
        check_reps(path, spec)
        try:
            spec.check_params()  # its params against its sweep, its precisions known
        except ArtifactError as e:
            raise ArtifactError(f"{path}: {e}") from None
        specs[name] = spec
    return specs


def check_reps(path: Path, spec: FigureSpec) -> None:
    """A spec's default repetitions are 1 or more at every preset: 0 or fewer ran nothing
    and stamped the figure finished, so a resume did nothing either."""
    from artifact.core.config import PRESETS

    for preset in PRESETS.values():
        reps = spec.default_reps(preset)
        if not isinstance(reps, int) or reps < 1:
            raise ArtifactError(
                f"{path}: default_reps gives {reps!r} at preset {preset.name}; accepted: "
                "an integer of 1 or more"
            )


REGISTRY: dict[str, FigureSpec] = {
    name: importlib.import_module(f"artifact.figures.{name}").SPEC for name in figure_names()
}
if extra_dir() is not None:  # after the package's own, in the folder's order
    REGISTRY |= {n: s for n, s in load_folder(extra_dir()).items() if n not in REGISTRY}

# README's first try ("kick the tires"): the microbenchmark, then the smallest training run
KICK_THE_TIRES = ("fig8", "fig4")

# The lists below are read from REGISTRY at each call, not copied at import, so every
# stage sees the same figures (tests/test_registry.py adds a throwaway one).


def all_figures() -> tuple[str, ...]:
    return tuple(REGISTRY)


def paper_figures() -> tuple[str, ...]:
    return tuple(n for n, s in REGISTRY.items() if s.in_paper)


def own_records() -> tuple[str, ...]:
    """What `python -m artifact all` runs: every figure but those drawn from another's records."""
    return tuple(n for n, s in REGISTRY.items() if s.records_of is None)


def with_check(kind: str) -> tuple[str, ...]:
    """The figures whose spec declares compare's check `kind` (FigureSpec.checks)."""
    return tuple(n for n, s in REGISTRY.items() if kind in s.checks)


def runs_aa_repeat(name: str) -> bool:
    """Whether the figure's repetitions run the A/A repeat: where it derives Eq. 1's noise
    floor, or where a figure that copies its records does (fig8 copies fig6's), so that
    the copy holds every phase."""
    return spec_of(name).runs_noise_floor or any(
        s.reuses == name and s.runs_noise_floor for s in REGISTRY.values()
    )


def spec_of(name: str) -> FigureSpec:
    """The figure's spec, its params checked against its sweep (FigureSpec.check_params);
    an unknown name is a one-line error listing the known ones."""
    try:
        spec = REGISTRY[name]
    except KeyError:
        raise bad_choice("experiment", name, all_figures()) from None
    return spec.check_params()


__all__ = [
    "KICK_THE_TIRES",
    "REGISTRY",
    "FigureSpec",
    "Panel",
    "Series",
    "all_figures",
    "extra_dir",
    "load_folder",
    "own_records",
    "paper_figures",
    "runs_aa_repeat",
    "spec_of",
    "with_check",
]
