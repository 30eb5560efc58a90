"""One request, carried whole (issue 62): the launcher hands the ranks one RankJob as one
JSON document, the worker parses it once; `run`'s experiment flags come from RunOptions'
declarations."""

import dataclasses
import shlex
from pathlib import Path

import pytest

from artifact.arguments import build_parser
from artifact.core.config import get_preset
from artifact.core.errors import ArtifactError
from artifact.core.options import RunOptions
from artifact.core.rankjob import RankJob
from artifact.figures import REGISTRY
from artifact.launch import request, torchrun
from artifact.launch.request import RunRequest

OPTIONS = RunOptions(precision="fp32", comm_bytes=4 << 20, models=("gpt3-1.3b",), adaptive=True)


def _request(**more) -> RunRequest:
    return RunRequest("fig8", get_preset("tiny"), "cpu", 2, OPTIONS, None, None, **more)


def test_the_job_round_trips_through_json():
    job = _request().job(Path("/tmp/out"), 3)
    assert job == RankJob("fig8", "tiny", "cpu", Path("/tmp/out"), 3, OPTIONS)
    assert RankJob.from_json(job.to_json()) == job
    assert '"options": {"precision": "fp32", "comm_bytes": 4194304' in job.to_json()


@pytest.mark.parametrize(
    ("edit", "said"),
    [
        ({"device": "auto"}, "unknown device 'auto'; accepted: cpu, cuda, rocm"),
        ({"nodes": 2}, "unknown rank job key 'nodes'"),
        ({"reps": None}, "the rank job lacks reps"),
    ],
)
def test_a_job_the_launcher_did_not_write_is_refused(edit, said):
    import json

    data = json.loads(RankJob("fig8", "tiny", "cpu", Path("o"), 1).to_json()) | edit
    data = {k: v for k, v in data.items() if v is not None}
    with pytest.raises(ArtifactError, match=said):
        RankJob.from_json(json.dumps(data))


def test_the_torchrun_command_carries_exactly_one_document():
    job = _request().job(Path("/tmp/a folder"), 3)
    cmd = torchrun.torchrun_command(job, _request())
    assert cmd[cmd.index("artifact.rank.worker") + 1 :] == ["--job", job.to_json()]
    assert cmd[3:6] == ["--nproc-per-node", "2", "--standalone"]
    # the log's line, shell-quoted, splits back into the command: it reruns as copied
    assert shlex.split(shlex.join(cmd)) == cmd


def test_the_worker_parses_the_job_once_and_nothing_else():
    from artifact.rank import worker

    job = RankJob("fig8", "tiny", "cpu", Path("/tmp/out"), 3, OPTIONS)
    parsed = []
    with pytest.MonkeyPatch.context() as m:
        m.setattr(RunOptions, "from_json", lambda data: parsed.append(data) or OPTIONS)
        assert worker._parse(["--job", job.to_json()]) == job
    assert parsed == [OPTIONS.as_json()]
    with pytest.raises(SystemExit):  # the flags it took before the job
        worker._parse(["--figure", "fig8", "--preset", "tiny", "--options", "{}"])


def test_a_figure_that_colocates_sets_nccls_multi_rank_mode_without_the_flag():
    from artifact.rank import worker

    def job(figure, **options):
        return RankJob(figure, "tiny", "cpu", Path("o"), 1, RunOptions(**options))

    assert worker.colocates(job("contention"))
    assert not worker.colocates(job("fig8"))
    assert worker.colocates(job("fig8", colocate=2))


def test_every_run_option_is_a_flag_of_run_with_its_declared_help():
    run = build_parser()._subparsers._group_actions[0].choices["run"]
    actions = {a.option_strings[0]: a for a in run._actions if a.option_strings}
    for f in dataclasses.fields(RunOptions):
        action = actions[f.metadata["flag"]]
        assert action.help.endswith(f.metadata["help"])
    takes = [name for name, spec in REGISTRY.items() if "comm_bytes" in spec.options]
    assert actions["--comm-mib"].help.startswith(f"{', '.join(takes[:-1])} or {takes[-1]}: ")
    assert actions["--recompute"].choices == ("auto", "on", "off")


def test_runs_flags_become_the_options_they_declare():
    args = build_parser().parse_args(
        ["run", "fig8", "--precision", "fp32", "--comm-mib", "4", "--power-interval-ms", "50"]
    )
    options = request.options(args, say=lambda *a, **k: None)
    assert options == RunOptions(precision="fp32", comm_bytes=4 << 20, power_interval_s=0.05)


def test_alls_flags_are_checked_as_each_figure_gets_them():
    """fig4 keeps --comm-ctas and leaves --colocate out: refused before any figure runs,
    not as fig4's failure in the middle of the suite."""
    with pytest.raises(ArtifactError, match="--comm-ctas sets the CTAs"):
        request.check_run_args(["--preset", "tiny", "--colocate", "2", "--comm-ctas", "8"])
    request.check_run_args(["--preset", "tiny", "--colocate", "2", "--fsdp-impl", "fsdp2"])
