"""Preflight refuses a GPU run on ROCm whose amdsmi Python package was made for another libamd_smi."""

import dataclasses
import importlib.metadata
import sys
import types

import pytest

from artifact.launch import preflight
from artifact.launch.preflight import Machine
from artifact.measure import device

ROCM_IMAGE = Machine(
    image="overlap-artifact:rocm",
    gpus=8,
    nvidia_driver=None,
    kfd="ok",
    shm_bytes=64 << 30,
    pid1="docker-init",
)


@pytest.mark.parametrize(
    ("versions", "agrees"),
    [
        (("26.2.1", "26.2.1", "7.2.4-61"), True),  # ROCm's own package: its library's number
        (("7.2.0", "26.2.1", "7.2.4-61"), True),  # an index copy made for this ROCm release
        (("7.0.2", "26.2.1", "7.2.4-61"), False),  # the index's copy for ROCm 7.0 on 7.2
        (("26.0.0", "26.2.1", "7.2.4-61"), False),  # another ROCm's own package
        (("7.2.0", "26.2.1", None), False),  # ROCm release unknown: only an exact match
    ],
)
def test_agreement(versions, agrees):
    assert preflight.amdsmi_agrees(*versions) is agrees


def test_a_mismatch_refuses_a_gpu_run_in_one_line(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    m = dataclasses.replace(ROCM_IMAGE, amdsmi=("7.0.2", "26.2.1", "7.2.4-61"))
    assert preflight.main([], machine=m) == 2
    lines = capsys.readouterr().err.splitlines()
    assert lines == [
        "error: the amdsmi Python package 7.0.2 was not made for this libamd_smi 26.2.1 "
        "(ROCm 7.2.4-61): install ROCm's own with `pip install --no-deps "
        "/opt/rocm/share/amd_smi`, or pass `--preset tiny`"
    ]
    assert list(tmp_path.iterdir()) == []
    # the CPU check does not use amdsmi: not refused
    assert preflight.main(["--preset", "tiny"], machine=m) == 0
    # agreeing versions, or none read (no ROCm library here): the run goes on
    for versions in (("26.2.1", "26.2.1", "7.2.4"), None):
        assert preflight.decide(dataclasses.replace(m, amdsmi=versions), cpu_on_purpose=False) == []


def _fake_amdsmi(monkeypatch, lib=None, needs_init=False):
    state = {"init": False}
    mod = types.ModuleType("amdsmi")
    mod.__version__ = "26.2.1"

    def get_lib_version():
        if lib is None:
            raise OSError("libamd_smi.so not loaded")
        if needs_init and not state["init"]:
            raise RuntimeError("not initialised")
        return {"major": lib[0], "minor": lib[1], "release": lib[2], "build": "abc"}

    mod.amdsmi_get_lib_version = get_lib_version
    mod.amdsmi_init = lambda: state.update(init=True)
    mod.amdsmi_shut_down = lambda: state.update(init=False)
    monkeypatch.setitem(sys.modules, "amdsmi", mod)
    return state


def test_device_reads_the_package_the_library_and_rocm(monkeypatch, tmp_path):
    (tmp_path / ".info").mkdir()
    (tmp_path / ".info" / "version").write_text("7.2.4-61\n")
    monkeypatch.setenv("ROCM_PATH", str(tmp_path))
    _fake_amdsmi(monkeypatch, lib=(26, 1, 0))
    installed = {"amdsmi": "7.0.2"}

    def version(name):
        if name not in installed:
            raise importlib.metadata.PackageNotFoundError(name)
        return installed[name]

    monkeypatch.setattr(importlib.metadata, "version", version)
    # the installed distribution's version first: what pip put there
    assert device.amdsmi_versions() == ("7.0.2", "26.1.0", "7.2.4-61")
    installed.clear()  # a copy on sys.path, not installed: the module's own __version__
    assert device.amdsmi_versions() == ("26.2.1", "26.1.0", "7.2.4-61")
    state = _fake_amdsmi(monkeypatch, lib=(26, 2, 1), needs_init=True)
    assert device.amdsmi_versions() == ("26.2.1", "26.2.1", "7.2.4-61")
    assert state["init"] is False  # shut down again
    _fake_amdsmi(monkeypatch, lib=None)
    assert device.amdsmi_versions() is None


def test_probe_asks_amdsmi_only_on_rocm(monkeypatch):
    monkeypatch.setattr(device, "amdsmi_versions", lambda: ("7.0.2", "26.2.1", "7.2.4"))
    monkeypatch.setenv("ARTIFACT_IMAGE", "overlap-artifact:rocm")
    assert preflight.probe().amdsmi == ("7.0.2", "26.2.1", "7.2.4")
    monkeypatch.setenv("ARTIFACT_IMAGE", "overlap-artifact:cuda")
    assert preflight.probe().amdsmi is None
