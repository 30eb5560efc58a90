"""Provenance names the GPU (UUID, serial), its power limit and clocks at the start and
end of a figure, and the CPU's model name."""

from artifact import env
from artifact.measure import device
from artifact.report.facts import hardware_line


class _FakeNvml:
    """pynvml's calls the state reads; the serial is not supported, as on many boards."""

    NVML_CLOCK_SM, NVML_CLOCK_MEM = 1, 2

    def nvmlDeviceGetUUID(self, h):
        return b"GPU-2c3e-abcd"

    def nvmlDeviceGetSerial(self, h):
        raise RuntimeError("NVML_ERROR_NOT_SUPPORTED")

    def nvmlDeviceGetEnforcedPowerLimit(self, h):
        return 700000

    def nvmlDeviceGetApplicationsClock(self, h, which):
        return {1: 1755, 2: 2619}[which]


def test_the_nvml_state_names_the_gpu_and_how_it_is_set():
    gpu = device.NvmlDevice.__new__(device.NvmlDevice)
    gpu._nv, gpu._h = _FakeNvml(), object()
    assert gpu.state() == {
        "uuid": "GPU-2c3e-abcd",
        "serial": None,  # not supported: None, not a failure
        "power_limit_w": 700.0,
        "app_sm_clock_mhz": 1755,
        "app_mem_clock_mhz": 2619,
    }
    assert device.NoDevice().state() == {}


def test_the_cpu_model_is_its_name_not_the_architecture(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text(
        "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 9454 48-Core Processor\n"
    )
    assert env.cpu_model(str(info)) == "AMD EPYC 9454 48-Core Processor"
    assert env.cpu_model(str(tmp_path / "none")) not in ("",)


def test_the_reports_hardware_line_names_the_gpu_and_its_limit():
    prov = {"gpu_count": 1, "gpu_model": "NVIDIA H100 80GB HBM3", "driver": "580.159.04",
            "cuda": "13.0", "gpu_state": {"uuid": "GPU-2c3e", "power_limit_w": 700.0}}  # fmt: skip
    line = hardware_line(prov, {"c": {"world_size": 1}})
    assert line.startswith(
        "1 x NVIDIA H100 80GB HBM3 (driver 580.159.04, CUDA 13.0, power limit 700 W, GPU-2c3e)"
    )


def test_a_figures_status_holds_the_gpu_as_it_ended(tmp_path):
    from artifact.rank.worker import _finish_status
    from artifact.store import RunStore

    store = RunStore(tmp_path)
    store.write_status("fig8", "running", "started", configs={})
    _finish_status(store, "fig8", 3, 1, {"uuid": "GPU-1", "power_limit_w": 650.0})
    status = store.status()["fig8"]
    assert status["status"] == "not run"  # no records: nothing ran
    assert status["gpu_state_end"] == {"uuid": "GPU-1", "power_limit_w": 650.0}
