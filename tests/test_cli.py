"""Bad input: one clear line naming the value and the accepted ones, exit 2, nothing written."""

import json

import pytest

from artifact.figures import all_figures
from tests.conftest import tree

UNKNOWN_FIGURE = f"unknown experiment 'nofig'; accepted: {', '.join(all_figures())}"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["run", "nofig"], UNKNOWN_FIGURE),
        (
            ["run", "fig8", "--preset", "huge"],
            "unknown preset 'huge'; accepted: tiny, quick, rehearsal, review, paper",
        ),
        (
            ["run", "fig8", "--device", "tpu"],
            "unknown device 'tpu'; accepted: auto, cpu, cuda, rocm",
        ),
        (
            ["run", "fig8", "--device", "cuda"],
            "device 'cuda' is not available on this machine; accepted here: cpu",
        ),
        (
            ["run", "fig8", "--preset", "quick"],
            "preset 'quick' needs a GPU; on CPU use --preset tiny",
        ),
        (
            ["run", "fig8", "--precision", "fp8"],
            "unknown precision 'fp8'; accepted: fp32, tf32, fp16, bf16",
        ),
        (["run", "fig8", "--reps", "0"], "--reps must be at least 1, got 0"),
        (
            ["run", "fig8", "--models", "gpt3-1.3b,gpt5"],
            "unknown model 'gpt5'; accepted: gpt3-1.3b, gpt3-2.7b, gpt3-6.7b, gpt3-13b, llama2-13b, gpt-tiny, llama-tiny, gpt-tiny4",
        ),
        (
            ["run", "fig8", "--power-interval-ms", "0"],
            "--power-interval-ms must be at least 1, got 0",
        ),
        (
            ["run", "contention", "--precision", "tf32"],
            "no contention point with precision 'tf32' in preset 'tiny'; accepted: fp32",
        ),
        (
            ["run", "contention", "--comm-mib", "3"],
            "no contention point of 3 MiB in preset 'tiny'; accepted --comm-mib: 4",
        ),
        (
            ["run", "contention", "--matmul-size", "64"],
            "--matmul-size does not apply to contention (each compute kind has its size); narrow the sweep with --precision or --comm-mib",
        ),
        (["run", "nofig", "--models", "gpt3-1.3b"], UNKNOWN_FIGURE),
    ],
)
@pytest.mark.slow
def test_bad_input_is_one_line_exit_2_nothing_written(cli, tmp_path, args, message):
    out = tmp_path / "out"
    res = cli(*args, "--out", str(out))
    assert res.returncode == 2, res.stderr
    lines = res.stderr.strip().splitlines()
    assert lines == [f"error: {message}"]
    assert "Traceback" not in res.stdout + res.stderr
    assert not out.exists()


@pytest.mark.slow
def test_unwritable_out_dir(cli, tmp_path):
    # A path below a regular file cannot be created, even by root (CI runs as root).
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    out = blocker / "results"
    res = cli("run", "fig8", "--out", str(out))
    assert res.returncode == 2
    # mkdir's "Not a directory" would not say which path is wrong; the line names it
    assert res.stderr.strip() == (
        f"error: --out '{out}' lies under '{blocker}', a file, not a folder: "
        "give a new folder or a run's results folder"
    )
    assert len(res.stderr.strip().splitlines()) == 1
    assert blocker.read_text() == "x" and tree(tmp_path) == ["a-file"]


def test_summarize_of_empty_folder_is_a_clear_error(cli, tmp_path):
    res = cli("summarize", str(tmp_path))
    assert res.returncode == 2
    assert res.stderr.strip() == f"error: no records under '{tmp_path / 'records'}'"
    assert tree(tmp_path) == []


@pytest.mark.slow  # over 1.5 s on 2 cores (a CLI process, or a long simulation)
@pytest.mark.parametrize("command", ["compare", "report"])
def test_compare_and_report_of_a_missing_folder(cli, tmp_path, command):
    res = cli(command, str(tmp_path / "nope"))
    assert res.returncode == 2
    assert res.stderr.strip() == f"error: no results folder '{tmp_path / 'nope'}'"
    assert not (tmp_path / "nope").exists()


@pytest.mark.slow
def test_env_on_cpu_reports_cpu_cleanly(cli):
    res = cli("env", "--json")
    assert res.returncode == 0, res.stderr
    assert "Traceback" not in res.stderr
    info = json.loads(res.stdout)
    assert info["device_kind"] == "cpu"
    assert info["gpu_count"] == 0 and info["gpu_model"] is None and info["driver"] is None
    assert info["torch"].startswith("2.")
    for key in ("deepspeed", "megatron_core", "nccl", "cuda", "rocm", "git_commit", "comm_env"):
        assert key in info


@pytest.mark.slow
def test_env_table(cli):
    res = cli("env")
    assert res.returncode == 0
    assert "device_kind" in res.stdout and "cpu" in res.stdout


@pytest.mark.slow  # over 1.5 s on 2 cores (a CLI process, or a long simulation)
def test_a_bad_figure_place_from_nox_is_one_line_exit_2_nothing_written(cli, tmp_path):
    out = tmp_path / "out"
    res = cli("run", "fig8", "--out", str(out), env={"ARTIFACT_FIGURE_OF": "10/9"})
    assert res.returncode == 2, res.stderr
    assert res.stderr.strip().splitlines() == [
        "error: ARTIFACT_FIGURE_OF='10/9' is not K/N with 1 <= K <= N (e.g. 3/9)"
    ]
    assert not out.exists()


def test_the_printed_command_names_this_interpreter(monkeypatch, tmp_path):
    """The `artifact` script beside this interpreter (`.venv/bin/artifact`, relative under
    the current folder; bare where it is first on PATH); without one (the images),
    `python -m artifact` only where that `python` is this interpreter, else its path."""
    import shutil
    import sys

    from artifact import cli

    bin_ = tmp_path / ".venv" / "bin"
    bin_.mkdir(parents=True)
    monkeypatch.setattr(sys, "executable", str(bin_ / "python"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(shutil, "which", lambda name: sys.executable)
    assert cli.invocation() == "python -m artifact"
    monkeypatch.setattr(shutil, "which", lambda name: "/usr/bin/python")
    assert cli.invocation() == ".venv/bin/python -m artifact"
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    assert cli.invocation() == f"{tmp_path}/.venv/bin/python -m artifact"
    (bin_ / "artifact").write_text("#!/bin/sh\n")  # pyproject's [project.scripts]
    assert cli.invocation() == f"{bin_}/artifact"
    monkeypatch.chdir(tmp_path)
    assert cli.invocation() == ".venv/bin/artifact"
    monkeypatch.setattr(shutil, "which", lambda name: str(bin_ / name))  # an activated venv
    assert cli.invocation() == "artifact"
