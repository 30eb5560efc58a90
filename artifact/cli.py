"""`python -m artifact run|summarize|compare|report|env` (nox sessions call this).

Only this module prints. Every ArtifactError becomes one line on stderr and exit code 2;
every input is checked before anything is written.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import time
from pathlib import Path

from rich import box
from rich.console import Console
from rich.markdown import Markdown
from rich.markup import escape
from rich.table import Table

from artifact import env as envmod
from artifact.command import invocation
from artifact.core import emulated as emulation_flags
from artifact.core.config import (
    PRECISIONS,
    check_device,
    default_preset,
    get_preset,
)
from artifact.core.errors import ArtifactError, Terminated, check_positive, interrupted_by
from artifact.core.options import RunOptions
from artifact.estimate import reference
from artifact.estimate.memory import RECOMPUTE_CHOICES
from artifact.figures import spec_of
from artifact.run import procs, progress, runplan

# soft wrap, for every print: a line longer than the terminal (or than 80 columns in a
# log) stays one line, so a reason or a path is not cut mid-way and grep finds it
console = Console(soft_wrap=True)
err_console = Console(stderr=True, soft_wrap=True)


def resolve_device(requested: str) -> str:
    """'auto' -> this machine's kind; a kind this machine lacks is an error."""
    check_device(requested)
    here = envmod.device_kind()
    if requested == "auto":
        return here
    if requested != "cpu" and requested != here:
        accepted = ", ".join(dict.fromkeys(["cpu", here]))
        raise ArtifactError(
            f"device {requested!r} is not available on this machine; accepted here: {accepted}"
        )
    return requested


def run_options(args: argparse.Namespace) -> RunOptions:
    """The experiment's knobs from the flags, every one checked before torch loads."""
    for name in ("reps", "gpus", "nproc", "nnodes", "hang_timeout_s", "rdzv_timeout_s"):
        check_positive(f"--{name.replace('_', '-')}", getattr(args, name))
    if args.nnodes and args.nnodes > 1 and not args.rdzv_endpoint:
        raise ArtifactError("--nnodes > 1 needs --rdzv-endpoint HOST:PORT")
    if args.rdzv_endpoint is not None:
        host, _, port = args.rdzv_endpoint.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ArtifactError(
                f"--rdzv-endpoint {args.rdzv_endpoint!r} is not HOST:PORT (e.g. node01:29500)"
            )
    options = RunOptions.from_flags(
        precision=args.precision,
        matmul_size=args.matmul_size,
        comm_mib=args.comm_mib,
        power_interval_ms=args.power_interval_ms,
        models=args.models,
        parallelisms=args.parallelisms,
        recompute=args.recompute,
        fsdp_impl=args.fsdp_impl,
        allow_power_cap=args.allow_power_cap,
        emulate_world=args.emulate_world,
        link_gbps=args.link_gbps,
        stand_in=args.stand_in,
        comm_ctas=args.comm_ctas,
        colocate=args.colocate,
        adaptive=args.adaptive,
    )
    if options.emulate_world:
        check_alone(args, options.emulate_world)
    if args.only_applicable:  # nox -s all hands every figure the same flags
        for flag in runplan.foreign_options(args.figure, options):
            console.print(f"{args.figure} does not take {flag}: left out for it")
        options = options.only(spec_of(args.figure).options)
    runplan.check_options(args.figure, options)
    return options


def check_alone(args: argparse.Namespace, world: int) -> None:
    """--emulate-world is one process on one device: a real multi-rank launch is refused."""
    counts = {"--nproc": args.nproc, "--gpus": args.gpus, "--nnodes": args.nnodes}
    emulation_flags.check_alone(world, counts)
    if args.rdzv_endpoint:
        raise ArtifactError(
            f"--emulate-world {world} with --rdzv-endpoint: emulation runs one process, "
            "with no rendezvous; accepted: --rdzv-endpoint left out"
        )


def processes(args: argparse.Namespace, device: str, preset, emulated: bool = False) -> int:
    """Ranks on this node: gloo processes on a CPU, one a GPU otherwise; one process
    under --emulate-world (rank 0 of W, alone)."""
    if emulated:
        if device != "cpu":
            import torch

            from artifact.core.emulated import link_gbs

            # an unknown GPU without --link-gbps is refused here, before the ranks start
            link_gbs(torch.cuda.get_device_name(0), args.link_gbps)
        return 1
    if device == "cpu":
        if args.gpus:
            raise ArtifactError(
                f"--gpus {args.gpus} but this run is on the CPU (no GPU here); "
                "CPU runs take --nproc (gloo processes)"
            )
        nproc = args.nproc or preset.cpu_processes
        cores = os.cpu_count() or 1
        if nproc > cores:
            raise ArtifactError(
                f"--nproc {nproc} but this machine has {cores} CPU core(s); accepted: 1-{cores}"
            )
        return nproc
    import torch

    nproc = args.gpus or torch.cuda.device_count()
    if nproc > torch.cuda.device_count():
        raise ArtifactError(
            f"--gpus {nproc} but this machine has {torch.cuda.device_count()} GPU(s)"
        )
    return nproc


def disk_need(figure: str, preset, nproc: int, options: RunOptions, out: Path) -> int | None:
    """What `figure` still writes into `out`, by the plan's disk estimate (None: unknown)."""
    from artifact.budget import disk_left

    argv = [figure, "--preset", preset.name]
    if options.emulate_world:
        argv += ["--emulate-world", str(options.emulate_world)]
    elif preset.device != "cpu":
        argv += ["--gpus", str(nproc)]
    return disk_left(argv, out, {figure})


def cmd_run(args: argparse.Namespace) -> int:
    from artifact.store import RunStore, check_space, default_out_dir, ensure_writable

    spec = spec_of(args.figure)
    figure = spec.records  # fig5 is drawn from fig4's records
    progress.figure_of()  # a bad ARTIFACT_FIGURE_OF (nox -s all sets it) before anything is written
    options = run_options(args)
    if args.rdzv_endpoint:  # bounded: an unreachable endpoint is one line, not minutes
        from artifact.run.launch import check_rendezvous

        check_rendezvous(args.rdzv_endpoint, args.rdzv_timeout_s)
    # One run a folder: refuse a held folder before torch loads. The agents of a
    # multi-node run share theirs (one CLI a node, the same --out), so they take none.
    shared = (args.nnodes or 1) > 1
    if not shared and args.out and Path(args.out).is_dir():
        procs.FolderLock(Path(args.out)).check()  # taken below, once the run is known to fit
    device = resolve_device(args.device)
    preset = get_preset(args.preset or default_preset(device != "cpu"))
    if device == "cpu" and preset.device != "cpu":
        raise ArtifactError(f"preset {preset.name!r} needs a GPU; on CPU use --preset tiny")
    experiment = spec_of(figure).module()
    nproc = processes(args, device, preset, emulated=options.emulate_world is not None)
    rank_env: dict[str, str] = {}  # what the ranks are told of the GPUs' other processes
    if device != "cpu":
        rank_env, others = procs.gpus_idle_env(nproc, args.allow_shared_device)
        if others:
            console.print(f"measuring beside other processes (--allow-shared-device): {others}")
    if hasattr(experiment, "check_options"):
        experiment.check_options(preset, options)
    out = Path(args.out) if args.out else default_out_dir(preset.name)
    fingerprint = envmod.fingerprint(envmod.capture())
    reps, note = runplan.reconcile(
        out,
        figure=figure,
        preset=preset.name,
        device=device,
        fingerprint=fingerprint,
        reps=args.reps,
        default_reps=spec_of(figure).default_reps(preset),
        options=options,
    )
    # before anything is written: a full disk is one line here, not tracebacks mid-run
    check_space(out, disk_need(figure, preset, nproc, options, out), figure)
    out = ensure_writable(out)
    lock = None if shared else procs.FolderLock(out).acquire()  # noqa: F841 (to the exit)
    runplan.record(
        out,
        figure=figure,
        preset=preset.name,
        device=device,
        fingerprint=fingerprint,
        reps=reps,
        options=options,
        nproc=nproc,
    )
    if note:
        console.print(note)
    console.print(f"[bold]{figure}[/]: preset {preset.name}, {device} x{nproc}, out {out}")
    store = RunStore(out)
    if (args.nnodes or 1) == 1 and store.finished(figure, reps, nproc):
        # The ranks would find every repetition on disk and skip it; starting them costs
        # 15-19 s a figure on a GPU (torchrun, imports, process group) in a resumed suite.
        if store.status()[figure]["status"] == "not run":  # this machine cannot run it
            done = "recorded 'not run' by this plan's ranks on this machine"
        else:
            done = f"all {reps} repetitions of every configuration are on disk"
        console.print(f"{figure}: {done} (status/{figure}.json); nothing to run")
        return _print_outcome(args, store, figure, out)
    return launch_and_report(
        args, figure, preset.name, device, out, reps, nproc, options, rank_env=rank_env
    )


def _interrupted(store, figure: str, why: str, reps: int, out: Path) -> int:
    """Three lines: what finished, what did not, and the command that resumes."""
    done = store.record_count(figure)
    err_console.print(
        f"{figure}: interrupted by {why}; {done} record(s) finished and kept\n"
        f"not finished: the rest of {figure}'s {reps} repetitions (status/{figure}.json)\n"
        f"resume: {invocation()} run {figure} --out {out}",
        markup=False,
        highlight=False,
    )
    return 130


def _launch(args, log_path, figure, preset, device, out, reps, nproc, options, rank_env):
    """The ranks, run under the live display of their progress (artifact/run/progress.py)."""
    from artifact.run import launch

    beacon = log_path.with_suffix(".progress")
    beacon.unlink(missing_ok=True)  # a killed run's beacon would show where that run was
    state = progress.State(figure, reps, time.monotonic(), progress.figure_of())
    display = progress.Display(err_console, state, beacon, log_path, getattr(args, "debug", False))
    with display:
        return launch.launch(
            log_path,
            hang_s=args.hang_timeout_s,
            echo=display.echo,
            rank_env=rank_env,
            figure=figure,
            preset=preset,
            device=device,
            out=out,
            reps=reps,
            nproc=nproc,
            options=options,
            nnodes=args.nnodes or 1,
            rdzv_endpoint=args.rdzv_endpoint,
            rdzv_timeout_s=args.rdzv_timeout_s,
        )


def launch_and_report(
    args, figure, preset, device, out, reps, nproc, options, rank_env=None
) -> int:
    """Start the ranks, record how they ended in status/, and print a digest of the summary."""
    from artifact.run import launch
    from artifact.store import RunStore

    log_path = out / "logs" / f"{figure}.log"
    store = RunStore(out)
    stop = out / "logs" / f"{figure}.stop"
    stop.unlink(missing_ok=True)
    STOP_FILE[:] = [stop]
    if removed := store.clean_partial():
        console.print(f"removed {removed} half-written file(s) a killed run left in {out}")
    for stale in procs.clear_stale_build_locks():
        console.print(f"removed a build lock a killed run left behind: {stale}")
    # a figure whose FSDP rows may go through DeepSpeed (its spec takes --fsdp-impl)
    uses_deepspeed = "fsdp_impl" in spec_of(figure).options and "deepspeed" in options.fsdp_impls
    if device == "cpu" and uses_deepspeed and not procs.built("deepspeed_shm_comm"):
        console.print(
            "first use: DeepSpeed builds its CPU communication op now (about "
            f"{reference.value('deepspeed_cpu_op_build_s'):.0f} s on 2 cores; needs a C++ "
            f"compiler and ninja), once, into {procs.extensions_dir()}"
        )
    try:
        outcome = _launch(
            args, log_path, figure, preset, device, out, reps, nproc, options, rank_env or {}
        )
    except (KeyboardInterrupt, Terminated) as e:
        why = interrupted_by(e)
        store.write_status(figure, "failed", f"interrupted by {why} (log: logs/{figure}.log)")
        return _interrupted(store, figure, why, reps, out)
    # The ranks are done: a Ctrl-C from here on stops the CLI at once (exit 130; every
    # record and the status are written already), with no "after the repetition" to wait for
    STOP_FILE[:] = []
    rc = outcome.returncode
    status = store.status().get(figure, {})
    if stop.exists():  # a first Ctrl-C: the ranks stopped between repetitions, if not done
        stop.unlink(missing_ok=True)
        if status.get("interrupted"):
            return _interrupted(store, figure, "Ctrl-C (between repetitions)", reps, out)
        if rc == 0:
            err_console.print(
                f"{figure}: the Ctrl-C came after the last repetition: {figure} finished"
            )
    if outcome.hung:
        store.write_status(figure, "failed", f"{outcome.hung} (log: logs/{figure}.log)")
        status = store.status()[figure]
    if outcome.error:  # a rank's own one line (a full disk): the run's error, exit 2
        store.write_status(figure, "failed", f"{outcome.error} (log: logs/{figure}.log)")
        raise ArtifactError(f"{figure}: {outcome.error}")
    if rc != 0 or status.get("status") in (None, "running"):
        if status.get("status") != "failed":  # the rank that failed did not say why itself
            error = launch.last_error(log_path) or "no error message; see the log"
            store.write_status(
                figure,
                "failed",
                f"the ranks exited with code {rc}: {error} (log: logs/{figure}.log)",
            )
        err_console.print(f"{figure}: failed: {store.status()[figure]['reason']}")
        return 1
    return _print_outcome(args, store, figure, out)


def _print_outcome(args, store, figure: str, out: Path) -> int:
    """A figure that ended: its status where it is not 'ran', each configuration that did
    not run, and a digest of the summary."""
    status = store.status()[figure]
    if status["status"] != "ran":
        console.print(f"{figure}: {status['status']} ({status['reason']})")
    for config_id, st in status.get("configs", {}).items():
        console.print(f"{figure}: {config_id}: {st['status']}: {st['reason']}")
    for config_id, line in status.get("stopped", {}).items():  # --adaptive's decisions
        console.print(f"{figure}: {config_id}: {line}", markup=False, highlight=False)
    if not store.record_count():  # counted, not read: write_summary reads them
        return 0
    from artifact.analyze.summarize import write_summary

    summary = write_summary(out, allow_mixed=args.allow_mixed)
    print_digest(summary[summary["figure"] == figure], figure, out)
    return 0


def print_digest(df, figure: str, out: Path) -> None:
    """A couple of lines a configuration after a run (the whole table: summarize)."""
    console.print(
        f"[bold]{figure} summary[/] ({escape(str(out / 'summary.csv'))}; every metric: "
        f"{invocation()} summarize {escape(str(out))})"
    )
    for line in progress.digest(df):
        console.print(line, markup=False, highlight=False)


def print_summary(df, title: str) -> None:
    """One table per configuration, fitted to the terminal's width: only the CI column
    wraps (at its space), so no name or number is cut; a terminal too narrow even for
    that gets one line a row. Mode 'derived' is kind 'derived' (the kind column is left
    to summary.csv)."""
    console.print(f"[bold]{escape(title)}[/]")
    for config_id, rows in df.groupby("config_id", sort=False):
        note = rows["note"].iloc[0]
        console.print(f"\n[bold]{escape(config_id)}[/]")
        if isinstance(note, str) and note:  # pandas reads an empty note as NaN
            console.print(note, markup=False, highlight=False)
        cells = [
            (r.mode, r.metric, f"{r.mean:.4g}" + (" noisy" if r.noisy else ""), str(r.n), r.unit)
            + ("-" if r.ci_low != r.ci_low else f"[{r.ci_low:.4g}, {r.ci_high:.4g}]",)
            for r in rows.itertuples()
        ]
        header = ("mode", "metric", "mean", "n", "unit", "95% CI")
        # every column but the CI at its widest, the CI at its longest word, 2 between columns
        need = sum(max(len(c[i]) for c in [header, *cells]) + 2 for i in range(5))
        need += max(len(word) for c in cells for word in c[5].split())
        if console.width < need:
            for c in cells:
                console.print(f"{c[0]} {c[1]} = {c[2]} {c[5]} (n {c[3]}, {c[4]})", markup=False)
            continue
        table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, collapse_padding=True)
        for col in header:
            table.add_column(col, no_wrap=col != "95% CI", overflow="fold")
        for c in cells:
            table.add_row(*c)
        console.print(table)


def writer_lock(out: Path):
    """One writer a folder: a stage that writes into `out` takes its lock. A folder a
    run has written (its lock file, or records) is locked; any other is left to the
    stage to refuse, with no lock file left behind."""
    ran = (out / ".run.lock").is_file() or (out / "records").is_dir()
    return procs.FolderLock(out).acquire() if ran else None


def cmd_summarize(args: argparse.Namespace) -> int:
    from artifact.analyze.summarize import write_summary

    out = Path(args.dir)
    lock = writer_lock(out)  # noqa: F841 (held until this process exits)
    summary = write_summary(out, allow_mixed=args.allow_mixed)
    if args.brief:
        configs = summary.groupby(["figure", "config_id"]).ngroups
        console.print(
            f"{out / 'summary.csv'}: {len(summary)} rows, {configs} configurations "
            f"(the table: {invocation()} summarize {escape(str(out))})"
        )
        return 0
    print_summary(summary, title=str(out / "summary.csv"))
    return 0


def cmd_env(args: argparse.Namespace) -> int:
    info = envmod.capture()
    if args.json:
        print(json.dumps(info, indent=2, sort_keys=True))
        return 0
    table = Table(title="environment", show_header=False)
    for k, v in info.items():
        table.add_row(k, "-" if v is None else str(v))
    console.print(table)
    return 0


def cmd_restore_caps(args: argparse.Namespace) -> int:
    from artifact.measure import caps

    done = caps.restore_all()
    console.print(
        "\n".join(done) if done else f"nothing to restore (no saved limits in {caps.state_dir()})"
    )
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    from artifact.judge.compare import write_verdicts
    from artifact.judge.verdicts import row_kinds, tally
    from artifact.store import stale_summary

    out = Path(args.dir)  # Results.load names a missing folder
    lock = writer_lock(out)  # noqa: F841 (held until this process exits)
    if stale := stale_summary(out):  # judged from the records as they are now
        from artifact.analyze.summarize import write_summary

        console.print(f"{out / 'summary.csv'} is older than {stale} record(s): summarizing again")
        write_summary(out)
    verdicts = write_verdicts(out)
    say_commits(out)
    if verdicts["verdict"].isin(("not applicable", "not run")).all():
        # nothing judged (a CPU run): a line a verdict and reason, not a table of
        # identical rows
        console.print(
            f"verdicts ({out / 'verdicts.csv'}): none of its {len(verdicts)} rows judged "
            f"({row_kinds(verdicts)})"
        )
        counts = verdicts.groupby(["verdict", "reason"], sort=False).size()
        for (verdict, reason), n in counts.items():
            console.print(f"  {n} {verdict}: {reason}")
        console.print(tally(verdicts))
        return 0
    table = Table(title=f"verdicts ({out / 'verdicts.csv'})")
    for col in ("figure", "item", "verdict", "reason"):
        table.add_column(col, overflow="fold")
    for r in verdicts.itertuples():
        table.add_row(r.figure, r.item, r.verdict, r.reason)
    console.print(table)
    console.print(tally(verdicts))
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from artifact.report import write_report
    from artifact.store import stale_summary

    out = Path(args.dir)  # Results.load names a missing folder
    lock = writer_lock(out)  # noqa: F841 (held until this process exits)
    if stale := stale_summary(out):
        raise ArtifactError(
            f"'{out / 'summary.csv'}' is older than {stale} record(s): run "
            f"`{invocation()} compare {out}` first (it summarizes again), then report"
        )
    verdicts, summary = out / "verdicts.csv", out / "summary.csv"
    if (
        verdicts.is_file()
        and summary.is_file()
        and summary.stat().st_mtime_ns > verdicts.stat().st_mtime_ns
    ):
        raise ArtifactError(
            f"'{verdicts}' is older than summary.csv: run `{invocation()} compare {out}` first"
        )
    report = write_report(out)
    say_commits(out)
    lines = (report / "appendix.md").read_text().splitlines()
    first = next(line for line in lines if line and not line.startswith("#"))  # past the title
    console.print(Markdown(first))  # its **bold**, not the asterisks
    console.print(f"report: {report / 'appendix.html'}")
    return 0


def say_commits(out: Path) -> None:
    """A folder whose records come from several commits (summarised with --allow-mixed)
    names every one of them, not only the first record's."""
    from artifact.store import commits

    found = commits(out)
    if len(found) > 1:
        console.print(
            f"records in {out} come from {len(found)} commits: {', '.join(found)}",
            markup=False,
            highlight=False,
        )


class OneLineParser(argparse.ArgumentParser):
    """A bad flag is one line and exit 2, not the whole usage (`--help` still has it)."""

    def error(self, message: str):
        self.exit(2, f"error: {message} (see {self.prog} --help)\n")


def check_run_args(run_args: list[str]) -> None:
    """The flags `all` hands every figure, checked once before anything runs: a bad value
    is one line and exit 2, not one error per figure."""
    # as `all` hands them on: each figure keeps the flags it takes (--only-applicable), so
    # a figure's own flag (--fsdp-impl, --emulate-world) is no error for fig8; the values
    # are still checked, and the "left out" notes wait for each figure's own run
    args = build_parser().parse_args(["run", "fig8", *run_args, "--only-applicable"])
    with console.capture():
        run_options(args)
    device = resolve_device(args.device)
    preset = get_preset(args.preset or default_preset(device != "cpu"))
    if device == "cpu" and preset.device != "cpu":
        raise ArtifactError(f"preset {preset.name!r} needs a GPU; on CPU use --preset tiny")
    if args.out:  # one line here, not one per figure
        from artifact.store import check_not_a_file

        check_not_a_file(Path(args.out))


def cmd_all(args: argparse.Namespace) -> int:
    from artifact import budget
    from artifact.suite import run_all

    run_args, budget_s = budget.pop(args.run_args)  # `all`'s own flag; the rest go to `run`
    # everything `all` will need, checked before it runs anything: the flags, and
    # expected/ (compare's input, read at the end); the folder and the rendezvous: run_all
    check_run_args(run_args)
    from artifact.judge.expected import load_expected

    load_expected()
    return run_all(
        run_args,
        say=lambda line: console.print(line, markup=False, highlight=False),
        budget_s=budget_s,
    )


def cmd_plan(args: argparse.Namespace) -> int:
    from artifact import plan

    return plan.run(args)


def build_parser() -> argparse.ArgumentParser:
    """Every command and flag (`--help`'s text). Long on purpose: one `add_argument` a
    flag, in the order `--help` shows them; split, the CLI's reference would scatter."""
    p = OneLineParser(prog=invocation(), description=__doc__.splitlines()[0])
    p.add_argument(
        "--debug",
        action="store_true",
        help="show tracebacks of internal errors, and all of the ranks' output during a run",
    )
    sub = p.add_subparsers(dest="command", required=True, parser_class=OneLineParser)

    run = sub.add_parser("run", help="run one figure's experiment")
    run.add_argument("figure", help="fig4 ... fig11, contention or v2")
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
    run.add_argument("--models", help="comma-separated model names (FSDP and pipeline figures)")
    run.add_argument("--parallelisms", help="fig4/fig5: fsdp, pipeline or both (default both)")
    run.add_argument(
        "--recompute",
        choices=RECOMPUTE_CHOICES,
        help="activation recomputation (training figures): auto (default) turns it on where "
        "the preset's memory rule says a configuration would not fit without it",
    )
    run.add_argument(
        "--fsdp-impl",
        help="fig4, fig5, fig10, fig11: FSDP rows through deepspeed (ZeRO-3, the paper's; "
        "default), fsdp2 (torch) or both side by side (deepspeed,fsdp2)",
    )
    run.add_argument(
        "--power-interval-ms", type=int, help="power sampling interval (default 20 ms)"
    )
    run.add_argument("--matmul-size", type=int, help="fig8: M=N=K of the matmul")
    run.add_argument("--precision", help=f"fig8, v2, contention: one of {', '.join(PRECISIONS)}")
    run.add_argument(
        "--comm-mib", type=int, help="fig8, v2, contention: all-reduce size in MiB (paper: 1024)"
    )
    run.add_argument(
        "--emulate-world",
        help="fig4, fig5, fig10, fig11: run rank 0 of W ranks alone on one device (fake "
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
        help="fig8, contention: W real NCCL ranks on this one GPU, one thread a rank "
        "(needs NCCL 2.30 or newer)",
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
        help="fig9: let the run change GPU power limits (restored afterwards; never on shared machines)",
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
    run.set_defaults(func=cmd_run)

    every = sub.add_parser(
        "all",
        help="every figure into one folder, then summary, verdicts and report "
        "(takes run's flags, and --budget 6h: the figures that judge the most items an hour "
        "first, while the plan's time fits; a failing figure does not stop the others)",
    )
    every.set_defaults(func=cmd_all)

    summ = sub.add_parser("summarize", help="rebuild DIR/summary.csv from DIR/records")
    summ.add_argument("dir")
    summ.add_argument("--allow-mixed", action="store_true")
    summ.add_argument(
        "--brief",
        action="store_true",
        help="one line, not the table (nox -s all: each figure has printed its digest)",
    )
    summ.set_defaults(func=cmd_summarize)

    cmp = sub.add_parser("compare", help="DIR/summary.csv + expected/ -> DIR/verdicts.csv")
    cmp.add_argument("dir")
    cmp.set_defaults(func=cmd_compare)

    rep = sub.add_parser("report", help="write DIR/report/ (appendix in Markdown, HTML, LaTeX)")
    rep.add_argument("dir")
    rep.set_defaults(func=cmd_report)

    rc = sub.add_parser("restore-caps", help="restore GPU limits saved by a run that was killed")
    rc.set_defaults(func=cmd_restore_caps)

    pl = sub.add_parser("plan", help="configurations, memory, time and disk before a run")
    from artifact.plan import add_arguments

    add_arguments(pl)
    pl.set_defaults(func=cmd_plan)

    e = sub.add_parser("env", help="describe this machine and its stack")
    e.add_argument("--json", action="store_true", help="print JSON")
    e.set_defaults(func=cmd_env)
    return p


_TERMINATED: list[bool] = []


def _on_sigterm(signum, frame):
    # once: the same SIGTERM can come twice (to the process group, and forwarded by
    # `all` to the figure it runs), and a second must not cut short the first's handling
    if not _TERMINATED:
        _TERMINATED.append(True)
        raise Terminated()


STOP_FILE: list[Path] = []  # where a first Ctrl-C asks the ranks to stop (set by a run)


def _on_sigint(signum, frame):
    """First Ctrl-C: the ranks stop after the repetition they are in. Second: now."""
    if STOP_FILE and not STOP_FILE[0].exists():
        STOP_FILE[0].touch()
        err_console.print("stopping after the current repetition (Ctrl-C again: stop now)")
        return
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    parser = build_parser()
    args, rest = parser.parse_known_args(argv)
    if args.command == "all":  # the flags go on to each figure's `run`, which checks them
        args.run_args = rest
    elif rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    signal.signal(signal.SIGTERM, _on_sigterm)
    signal.signal(signal.SIGINT, _on_sigint)
    try:
        return args.func(args)
    except (KeyboardInterrupt, Terminated) as e:  # where nothing was left half-done
        err_console.print(f"interrupted by {interrupted_by(e)}", markup=False, highlight=False)
        return 130
    except ArtifactError as e:
        err_console.print(f"error: {e}", markup=False, highlight=False)
        return 2
    except Exception as e:  # a bug, not bad input: one line, the traceback with --debug
        if args.debug:
            raise
        first = (str(e).strip().splitlines() or [""])[0][:300]
        err_console.print(
            f"internal error: {type(e).__name__}: {first} (run again with --debug for the traceback)",
            markup=False,
            highlight=False,
        )
        return 1


if __name__ == "__main__":
    sys.exit(main())
