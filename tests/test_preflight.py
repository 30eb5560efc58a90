"""Preflight's decisions at their seams: one line, exit 2 and nothing written; and the ranks' DS_ACCELERATOR."""

import dataclasses

import pytest

from artifact.launch import preflight, torchrun
from artifact.launch.preflight import Machine

CUDA_IMAGE = Machine(
    image="overlap-artifact:cuda",
    gpus=8,
    nvidia_driver="580.65.06",
    kfd="absent",
    shm_bytes=64 << 30,
    pid1="docker-init",
)


def _run(machine, argv, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rc = preflight.main(argv, machine=machine)
    err = capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []  # nothing written
    return rc, err.splitlines()


def _fails(machine, capsys, tmp_path, monkeypatch, argv=()):
    rc, lines = _run(machine, list(argv), capsys, tmp_path, monkeypatch)
    assert rc == 2
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    return lines[0]


def test_a_fit_gpu_machine_passes_quietly(capsys, tmp_path, monkeypatch):
    assert _run(CUDA_IMAGE, [], capsys, tmp_path, monkeypatch) == (0, [])


def test_no_gpu_in_the_cuda_image_names_the_missing_flag(capsys, tmp_path, monkeypatch):
    m = dataclasses.replace(CUDA_IMAGE, gpus=0, nvidia_driver=None)
    line = _fails(m, capsys, tmp_path, monkeypatch)
    assert "--gpus all" in line and "Container Toolkit" in line and ">= 580" in line
    assert "--preset tiny" in line


def test_no_gpu_in_the_rocm_image_names_the_device_flags(capsys, tmp_path, monkeypatch):
    m = dataclasses.replace(CUDA_IMAGE, image="overlap-artifact:rocm", gpus=0, nvidia_driver=None)
    line = _fails(m, capsys, tmp_path, monkeypatch)
    assert "/dev/kfd is not in the container" in line and "--device=/dev/kfd" in line
    denied = dataclasses.replace(m, kfd="denied")
    assert "group" in _fails(denied, capsys, tmp_path, monkeypatch)


def test_the_tiny_preset_is_the_cpu_check_on_purpose(capsys, tmp_path, monkeypatch):
    m = dataclasses.replace(CUDA_IMAGE, gpus=0, nvidia_driver=None)
    for argv in (["--preset", "tiny"], ["--out", "x", "--device", "cpu"]):
        rc, lines = _run(m, argv, capsys, tmp_path, monkeypatch)
        assert rc == 0 and lines == [
            "CPU check on purpose: a functional check that evaluates no claim of the paper"
        ]


def test_an_old_host_driver_gives_the_version_found_and_needed(capsys, tmp_path, monkeypatch):
    m = dataclasses.replace(CUDA_IMAGE, gpus=0, nvidia_driver="550.54.15")
    line = _fails(m, capsys, tmp_path, monkeypatch)
    assert "550.54.15" in line and "580 or newer" in line


def test_small_shm_for_the_gpu_count_names_the_flag(capsys, tmp_path, monkeypatch):
    m = dataclasses.replace(CUDA_IMAGE, shm_bytes=64 << 20)  # Docker's default
    line = _fails(m, capsys, tmp_path, monkeypatch)
    assert "64 MiB" in line and "8 GPUs" in line and "--ipc=host" in line
    # one GPU needs no NCCL shared memory; --gpus 1 uses one
    assert _run(m, ["--gpus", "1"], capsys, tmp_path, monkeypatch) == (0, [])


def test_outside_the_images_no_gpu_is_a_loud_note_not_an_error(capsys, tmp_path, monkeypatch):
    m = dataclasses.replace(CUDA_IMAGE, image=None, gpus=0, nvidia_driver=None, pid1="")
    rc, lines = _run(m, [], capsys, tmp_path, monkeypatch)
    assert rc == 0 and len(lines) == 1 and lines[0].startswith("WARNING: no GPU seen")
    # a GPU preset asked for: no "running the tiny CPU preset" before the run's own error
    rc, lines = _run(m, ["--preset", "quick"], capsys, tmp_path, monkeypatch)
    assert rc == 0 and lines == []
    # `nox -s fig8 -- --help` runs nothing: no warning before the usage, even in an image
    for machine in (m, dataclasses.replace(m, image="overlap-artifact:cuda")):
        assert _run(machine, ["--help"], capsys, tmp_path, monkeypatch) == (0, [])


def test_nox_as_pid_1_is_warned_about(capsys, tmp_path, monkeypatch):
    m = dataclasses.replace(CUDA_IMAGE, pid1="nox")
    rc, lines = _run(m, [], capsys, tmp_path, monkeypatch)
    assert rc == 0 and lines == [
        "warning: nox runs as PID 1: add `--init` to `docker run` so that `docker stop` "
        "reaches the ranks"
    ]


def test_probe_runs_here():
    m = preflight.probe()
    assert m.gpus >= 0 and m.kfd in ("ok", "absent", "denied")


@pytest.mark.parametrize(("device", "accelerator"), [("cpu", "cpu"), ("cuda", "cuda")])
def test_the_ranks_accelerator_follows_the_device_not_the_image(device, accelerator):
    env = torchrun.child_env(device, {"DS_ACCELERATOR": "rocm" if device == "cpu" else "cpu"})
    assert env["DS_ACCELERATOR"] == accelerator
