"""Power caps: permission, save-before-change, restore on every exit path, restore-caps.

No GPU here, so the setter (the one hardware seam) is the JSON-file fake of caps.py.
"""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from artifact.core.errors import ArtifactError
from artifact.measure import caps
from tests.conftest import ROOT, run_cli


@pytest.fixture
def fake_gpus(tmp_path, monkeypatch):
    """Two fake GPUs at their 700 W default (range 200-700 W), state kept under tmp_path."""
    device = tmp_path / "fake-gpus.json"
    device.write_text(
        json.dumps(
            {str(i): {"limit_w": 700.0, "range_w": [200, 700], "clock_mhz": None} for i in (0, 1)}
        )
    )
    monkeypatch.setenv(caps.FAKE_ENV, str(device))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    return device


def limits(device):
    return {k: v["limit_w"] for k, v in json.loads(device.read_text()).items()}


def test_nothing_changes_without_permission(fake_gpus):
    with (
        pytest.raises(ArtifactError, match="needs --allow-power-cap"),
        caps.capped([0], allowed=False, power_w=300),
    ):
        pass
    assert limits(fake_gpus) == {"0": 700.0, "1": 700.0}
    assert not caps.state_dir().exists()


def test_originals_are_saved_before_the_first_change(fake_gpus):
    state = caps.default_state_file("t")
    seen = []

    class Watching(caps.FakeCapSetter):
        def set_power_limit_w(self, watts):
            seen.append(json.loads(state.read_text()))  # must exist already
            super().set_power_limit_w(watts)

    with caps.capped([0, 1], allowed=True, power_w=300, state_file=state, opener=Watching):
        assert limits(fake_gpus) == {"0": 300.0, "1": 300.0}
    assert seen[0]["gpus"] == [{"index": 0, "limit_w": 700.0}, {"index": 1, "limit_w": 700.0}]
    assert limits(fake_gpus) == {"0": 700.0, "1": 700.0}
    assert not state.exists()


def test_restored_after_an_exception(fake_gpus):
    with (
        pytest.raises(RuntimeError),
        caps.capped([0], allowed=True, power_w=250),
    ):
        assert limits(fake_gpus)["0"] == 250.0
        raise RuntimeError("workload failed")
    assert limits(fake_gpus)["0"] == 700.0
    assert not list(caps.state_dir().glob("*.json"))


def test_device_setter_saves_and_restores_the_management_limit(tmp_path, monkeypatch):
    """Through the device layer a cap replaces the management limit, not the enforced one."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))

    class Gpu:  # the device layer's side of the seam; enforced below the set limit
        name = "stand-in"
        limit_w = 700.0

        def power_limit_w(self):
            return 650.0

        def management_limit_w(self):
            return self.limit_w

        def limit_range_w(self):
            return (200.0, 700.0)

        def set_power_limit_w(self, watts):
            self.limit_w = watts

    gpu = Gpu()
    with caps.capped([0], allowed=True, power_w=300, opener=lambda i: caps.DeviceCapSetter(gpu)):
        assert gpu.limit_w == 300.0
    assert gpu.limit_w == 700.0


def test_restored_on_sigint(fake_gpus):
    # the handler before: Python's default in a terminal, SIG_IGN under nohup or a
    # background job; capped() must put back whichever it found
    before = signal.getsignal(signal.SIGINT)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # so the SIGINT below raises
    try:
        _capped_then_sigint(fake_gpus)
    finally:
        signal.signal(signal.SIGINT, before)


def test_restored_on_sigint_keeps_an_ignored_handler(fake_gpus):
    """Started with SIGINT ignored (nohup, `&`): capped() restores SIG_IGN, not Python's default."""
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with caps.capped([1], allowed=True, power_w=400):
            assert limits(fake_gpus)["1"] == 400.0
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, before)
    assert limits(fake_gpus)["1"] == 700.0


def _capped_then_sigint(fake_gpus):
    found = signal.getsignal(signal.SIGINT)
    with pytest.raises(KeyboardInterrupt), caps.capped([1], allowed=True, power_w=400):
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(5)  # the handler interrupts this
    assert limits(fake_gpus)["1"] == 700.0
    assert signal.getsignal(signal.SIGINT) is found


def test_out_of_range_cap_is_refused_before_any_change(fake_gpus):
    with (
        pytest.raises(ArtifactError, match="power cap 150 W is outside GPU 0's range 200-700 W"),
        caps.capped([0], allowed=True, power_w=150),
    ):
        pass
    assert limits(fake_gpus)["0"] == 700.0 and not list(caps.state_dir().glob("*.json"))


HOLDER = textwrap.dedent(
    """
    import time
    from artifact.measure import caps
    with caps.capped([0], allowed=True, power_w=300):
        print("capped", flush=True)
        time.sleep(60)
    """
)


def _hold_cap():
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout.readline().strip() == "capped"
    return proc


def test_restored_on_sigterm(fake_gpus):
    proc = _hold_cap()
    assert limits(fake_gpus)["0"] == 300.0
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 128 + signal.SIGTERM
    assert limits(fake_gpus)["0"] == 700.0
    assert not list(caps.state_dir().glob("*.json"))


@pytest.mark.slow
def test_restore_caps_after_a_hard_kill(fake_gpus):
    proc = _hold_cap()
    proc.kill()
    proc.wait(timeout=30)
    assert limits(fake_gpus)["0"] == 300.0  # nothing could run on SIGKILL
    assert len(list(caps.state_dir().glob("saved-caps-*.json"))) == 1
    # a new run refuses to cap on top of unrestored limits
    with (
        pytest.raises(ArtifactError, match="restore-caps"),
        caps.capped([0], allowed=True, power_w=300),
    ):
        pass
    res = run_cli("restore-caps")
    assert res.returncode == 0, res.stderr
    assert "GPU 0: power limit 700 W" in res.stdout
    assert limits(fake_gpus)["0"] == 700.0
    assert not list(caps.state_dir().glob("*.json"))
    assert "nothing to restore" in run_cli("restore-caps").stdout


def test_paper_caps_scaled_to_an_h200():
    levels = caps.scaled_cap_levels([300, 250, 200, 150, 100], (100, 400), (200, 700))
    assert levels == [533.3, 450.0, 366.7, 283.3, 200.0]


@pytest.mark.slow
def test_fig9_without_permission_is_not_run_and_changes_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv(caps.FAKE_ENV, "1")  # a machine that could cap
    out = tmp_path / "out"
    res = run_cli("run", "fig9", "--out", str(out))
    assert res.returncode == 0, res.stderr
    assert "fig9: not run (needs --allow-power-cap)" in res.stdout
    status = json.loads((out / "status" / "fig9.json").read_text())
    assert status["status"] == "not run" and status["reason"] == "needs --allow-power-cap"
    assert not (out / "records").exists()


@pytest.mark.slow
@pytest.mark.parametrize("flag", [["--allow-power-cap"], []])
def test_fig9_with_no_gpu_says_why_flag_or_not(tmp_path, monkeypatch, flag):
    """No power control here: that is the reason, not the missing flag (which would not help)."""
    monkeypatch.delenv(caps.FAKE_ENV, raising=False)
    out = tmp_path / "out"
    res = run_cli("run", "fig9", *flag, "--out", str(out))
    assert res.returncode == 0, res.stderr
    status = json.loads((out / "status" / "fig9.json").read_text())
    assert status["status"] == "not run" and status["reason"].startswith("no GPU power control")


@pytest.mark.slow
def test_fig9_sweep_through_the_fake_setter(tmp_path, fake_gpus):
    out = tmp_path / "out"
    res = run_cli("run", "fig9", "--allow-power-cap", "--reps", "2", "--out", str(out))
    assert res.returncode == 0, res.stdout + res.stderr
    status = json.loads((out / "status" / "fig9.json").read_text())
    assert status["status"] == "ran" and status["setter"] == "fake"
    assert status["caps_w"] == [533.3, 450.0, 366.7, 283.3, 200.0]
    configs = sorted(p.name for p in (out / "records" / "fig9").iterdir())
    assert len(configs) == 6 and any(c.endswith("_uncapped") for c in configs)
    rec = json.loads(
        next((out / "records" / "fig9").glob("*_cap200W/overlap/rep-000.json")).read_text()
    )
    assert rec["config"]["power_cap_w"] == 200.0 and rec["config"]["cap_setter"] == "fake"
    assert "fake setter" in rec["config"]["note"]
    assert limits(fake_gpus) == {"0": 700.0, "1": 700.0}  # every cap was restored
    assert not list(caps.state_dir().glob("*.json"))
