"""The CLI's command line: every command and flag (`--help`'s text; cli.py dispatches on
`command`). The figures a flag is for come from the registry (each spec's `options`)."""

from __future__ import annotations

import argparse

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


def build_parser() -> argparse.ArgumentParser:
    """Every command and flag (`--help`'s text). Long on purpose: one `add_argument` a
    flag, in the order `--help` shows them; split, the CLI's reference would scatter."""
    from artifact.core.config import PRECISIONS
    from artifact.core.options import RECOMPUTE_CHOICES
    from artifact.plan import add_arguments

    p = OneLineParser(prog=invocation(), description=DESCRIPTION)
    p.add_argument(
        "--debug",
        action="store_true",
        help="show tracebacks of internal errors, and all of the ranks' output during a run",
    )
    sub = p.add_subparsers(dest="command", required=True, parser_class=OneLineParser)

    run = sub.add_parser("run", help="run one figure's experiment")
    run.add_argument("figure", help=_figures())
    run.add_argument("--preset", help="tiny (CPU), quick, review or paper (GPU); default by device")
    run.add_argument("--device", default="auto", help="auto, cpu, cuda or rocm (default auto)")
    run.add_argument("--out", help="output folder (default results/<timestamp>-<preset>)")
    run.add_argument("--reps", type=int, help="repetitions (default: the preset's)")
    run.add_argument(
        "--adaptive",
        action="store_true",
        help="the stopping rule: --reps (or the preset's) becomes the most repetitions; each "
        "configuration runs 5, then as many as its judged quantities need (docs/measurement.md)",
    )
    run.add_argument("--gpus", type=int, help="GPUs to use (default: all)")
    run.add_argument("--nproc", type=int, help="gloo processes on CPU (default: the preset's)")
    run.add_argument(
        "--ranks-per-gpu",
        type=int,
        help="K ranks, each a process, share each GPU (rank r on GPU r // K; needs NCCL 2.30 "
        "or newer): a dress rehearsal of a K-times-larger world, not a measurement (default 1)",
    )
    run.add_argument("--models", help="comma-separated model names (FSDP and pipeline figures)")
    run.add_argument(
        "--parallelisms",
        help=f"{_figures('parallelisms')}: fsdp, pipeline or both (default both)",
    )
    run.add_argument(
        "--recompute",
        choices=RECOMPUTE_CHOICES,
        help="activation recomputation (training figures): auto (default) turns it on where "
        "the preset's memory rule says a configuration would not fit without it",
    )
    run.add_argument(
        "--fsdp-impl",
        help=f"{_figures('fsdp_impl')}: FSDP rows through deepspeed (ZeRO-3, the paper's; "
        "default), fsdp2 (torch) or both side by side (deepspeed,fsdp2)",
    )
    run.add_argument(
        "--power-interval-ms", type=int, help="power sampling interval (default 20 ms)"
    )
    run.add_argument(
        "--matmul-size", type=int, help=f"{_figures('matmul_size')}: M=N=K of the matmul"
    )
    run.add_argument("--precision", help=f"{_figures('precision')}: one of {', '.join(PRECISIONS)}")
    run.add_argument(
        "--comm-mib",
        type=int,
        help=f"{_figures('comm_bytes')}: all-reduce size in MiB (paper: 1024)",
    )
    run.add_argument(
        "--emulate-world",
        help=f"{_figures('emulate_world')}: run rank 0 of W ranks alone on one device (fake "
        "process group, its traffic as paced local copies; records are labelled emulated)",
    )
    run.add_argument(
        "--link-gbps",
        help="with --emulate-world: the link's bandwidth in GB/s (gigabytes a second, one "
        "direction; default by GPU model, e.g. 450 for H100/H200 NVLink)",
    )
    run.add_argument(
        "--stand-in",
        help="with --emulate-world: what moves rank 0's bytes: copy (paced copies, the "
        "default) or nccl-shaped (one persistent kernel of C CTAs a collective, as NCCL's ring)",
    )
    run.add_argument(
        "--comm-ctas",
        help="CTAs of the NCCL-shaped stand-in (default: NCCL's channels for the GPU model, "
        "artifact/data/nccl_channels.json), or the total CTAs of --colocate's ranks",
    )
    run.add_argument(
        "--colocate",
        help=f"{_figures('colocate')}: W real NCCL ranks on this one GPU, one thread a rank "
        "(needs NCCL 2.30 or newer)",
    )
    run.add_argument(
        "--axes",
        help=f"{_figures('axes')}: the axes to run, comma-separated: base (the map and what "
        "holds compute back), order (compute-first beside holder-first), mitigation (NCCL's "
        "CTA policies and max_ctas, torch's SM carve-out); default all",
    )
    run.add_argument("--nnodes", type=int, help="nodes (torchrun rendezvous)")
    run.add_argument("--rdzv-endpoint", help="HOST:PORT of the rendezvous, with --nnodes")
    run.add_argument(
        "--rdzv-timeout-s",
        type=float,
        default=60.0,
        help="how long to wait for the rendezvous: its host to answer, the nodes to join "
        "(default 60)",
    )
    run.add_argument(
        "--allow-power-cap",
        action="store_true",
        help=f"{_figures('allow_power_cap')}: let the run change GPU power limits (restored "
        "afterwards; never on shared machines)",
    )
    run.add_argument(
        "--allow-mixed", action="store_true", help="summarise records of several environments"
    )
    run.add_argument("--only-applicable", action="store_true", help=argparse.SUPPRESS)
    run.add_argument(
        "--allow-shared-device",
        action="store_true",
        help="measure even where other processes use the GPU (records name them)",
    )
    run.add_argument(
        "--hang-timeout-s",
        type=float,
        default=600.0,
        help="fail a run whose ranks show no progress this long (default 600)",
    )

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

    sub.add_parser("restore-caps", help="restore GPU limits saved by a run that was killed")

    add_arguments(sub.add_parser("plan", help="configurations, memory, time and disk before a run"))

    e = sub.add_parser("env", help="describe this machine and its stack")
    e.add_argument("--json", action="store_true", help="print JSON")
    return p
