"""The CLI's command line: every command and flag (`--help`'s text; cli.py dispatches on
`command`). `run`'s experiment flags are declared with RunOptions' fields
(artifact.core.options); the figures a flag is for come from the registry (each spec's
`options`)."""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

from artifact.command import invocation

DESCRIPTION = "`python -m artifact run|summarize|compare|report|env` (nox sessions call this)."


class OneLineParser(argparse.ArgumentParser):
    """A bad flag is one line and exit 2, not the whole usage (`--help` still has it)."""

    def error(self, message: str):
        self.exit(2, f"error: {message} (see {self.prog} --help)\n")


def _figures(option: str | None = None) -> str:
    """The figures (of the registry) that take `option` (None: every figure), as prose."""
    from artifact.figures import REGISTRY

    names = [f for f, spec in REGISTRY.items() if option is None or option in spec.options]
    return ", ".join(names[:-1]) + f" or {names[-1]}" if len(names) > 1 else "".join(names)


def _option(name: str) -> tuple[str, dict[str, Any]]:
    """A RunOptions field as `run`'s flag: its declaration (artifact.core.options) gives
    the flag, its help (led by the figures that take it) and argparse's keywords."""
    from artifact.core.options import RunOptions

    meta = next(f.metadata for f in dataclasses.fields(RunOptions) if f.name == name)
    help = f"{_figures(name)}: {meta['help']}" if meta["figures"] else meta["help"]
    return meta["flag"], {"help": help, **meta["parse"]}


def _own(flag: str, help: str, **parse: Any) -> tuple[str, dict[str, Any]]:
    """A flag of the launcher's own (not an experiment's knob): its help, argparse's keywords."""
    return flag, {"help": help, **parse}


def _run_flags() -> list[tuple[str, dict[str, Any]]]:
    """`run`'s flags in --help's order: the launcher's own here, the experiment's knobs
    from their RunOptions declarations."""
    return [
        _own("--preset", "tiny (CPU), quick, review or paper (GPU); default by device"),
        _own("--device", "auto, cpu, cuda or rocm (default auto)", default="auto"),
        _own("--out", "output folder (default results/<timestamp>-<preset>)"),
        _own("--reps", "repetitions (default: the preset's)", type=int),
        _option("adaptive"),
        _own("--gpus", "GPUs to use (default: all)", type=int),
        _own("--nproc", "gloo processes on CPU (default: the preset's)", type=int),
        _own(
            "--ranks-per-gpu",
            "K ranks, each a process, share each GPU (rank r on GPU r // K; needs NCCL 2.30 "
            "or newer): a dress rehearsal of a K-times-larger world, not a measurement (default 1)",
            type=int,
        ),
        *map(_option, ("models", "parallelisms", "recompute", "fsdp_impl", "power_interval_s")),
        *map(_option, ("matmul_size", "precision", "comm_bytes", "emulate_world", "link_gbps")),
        *map(_option, ("stand_in", "comm_ctas", "colocate", "axes")),
        _own("--nnodes", "nodes (torchrun rendezvous)", type=int),
        _own("--rdzv-endpoint", "HOST:PORT of the rendezvous, with --nnodes"),
        _own(
            "--rdzv-timeout-s",
            "how long to wait for the rendezvous: its host to answer, the nodes to join "
            "(default 60)",
            type=float,
            default=60.0,
        ),
        _option("allow_power_cap"),
        _own("--allow-mixed", "summarise records of several environments", action="store_true"),
        _own("--only-applicable", argparse.SUPPRESS, action="store_true"),
        _own(
            "--allow-shared-device",
            "measure even where other processes use the GPU (records name them)",
            action="store_true",
        ),
        _own(
            "--hang-timeout-s",
            "fail a run whose ranks show no progress this long (default 600)",
            type=float,
            default=600.0,
        ),
    ]


def _add_run(sub) -> None:
    run = sub.add_parser("run", help="run one figure's experiment")
    run.add_argument("figure", help=_figures())
    for flag, how in _run_flags():
        run.add_argument(flag, **how)


def _add_suites(sub) -> None:
    """`all` and `rehearsal`: their flags go on to each figure's `run` (cli.main)."""
    sub.add_parser(
        "all",
        help="every figure into one folder, then summary, verdicts and report "
        "(takes run's flags, and --budget 6h: the figures that judge the most items an hour "
        "first, while the plan's time fits; a failing figure does not stop the others)",
    )
    sub.add_parser(
        "rehearsal",
        help="README's 4-GPU path on the GPUs present (ranks share a GPU: --ranks-per-gpu), or "
        "4 gloo processes on a CPU, at preset rehearsal; a functional check, no paper item "
        "judged (takes --world 4, --ranks-per-gpu K, --mps on|off, --out, and run's flags)",
    )


def _add_folder_stages(sub) -> None:
    """The stages that read a results folder: summarize, compare, report."""
    summ = sub.add_parser("summarize", help="rebuild DIR/summary.csv from DIR/records")
    summ.add_argument("dir")
    summ.add_argument("--allow-mixed", action="store_true")
    summ.add_argument(
        "--brief",
        action="store_true",
        help="one line, not the table (nox -s all: each figure has printed its digest)",
    )
    cmp = sub.add_parser("compare", help="DIR/summary.csv + expected/ -> DIR/verdicts.csv")
    cmp.add_argument("dir")
    rep = sub.add_parser("report", help="write DIR/report/ (appendix in Markdown, HTML, LaTeX)")
    rep.add_argument("dir")


def _add_machine(sub) -> None:
    """restore-caps, plan and env: the machine's limits, a run's cost, the machine."""
    from artifact.plan import add_arguments

    sub.add_parser("restore-caps", help="restore GPU limits saved by a run that was killed")
    add_arguments(sub.add_parser("plan", help="configurations, memory, time and disk before a run"))
    e = sub.add_parser("env", help="describe this machine and its stack")
    e.add_argument("--json", action="store_true", help="print JSON")


def build_parser() -> argparse.ArgumentParser:
    """Every command and flag (`--help`'s text), the commands in --help's order."""
    p = OneLineParser(prog=invocation(), description=DESCRIPTION)
    p.add_argument(
        "--debug",
        action="store_true",
        help="show tracebacks of internal errors, and all of the ranks' output during a run",
    )
    sub = p.add_subparsers(dest="command", required=True, parser_class=OneLineParser)
    _add_run(sub)
    _add_suites(sub)
    _add_folder_stages(sub)
    _add_machine(sub)
    return p
