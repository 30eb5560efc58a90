"""The one GPU device layer: every call into NVML or AMD-SMI in the artifact is made here.

One class per backend (`NvmlDevice`, `AmdSmiDevice`, and `NoDevice` where neither
works) with what the rest of the artifact needs from a GPU:
- `read()`: one reading of `FIELDS` (polled power, instant power, the cumulative
  energy counter, SM clock, temperature), NaN where the device has none;
- `power_limit_w()`: the enforced power limit (the TDP the paper normalises by);
- `limit_range_w()`: the range a power limit may be set in;
- `management_limit_w()` and `set_power_limit_w()`: the limit a cap replaces and
  restores, and setting it (used only by `caps`, which requires --allow-power-cap);
- `driver_version()` for provenance.
`power` (telemetry) and `caps` (capping and its restore) use these classes; no other
module imports pynvml or amdsmi. Tests put fakes at the next seam up: a telemetry
object handed to `power.PowerSampler`, a cap setter handed to `caps.capped`.

Opening a device is defensive (docs/design.md section 7): without a driver
`nvmlInit()` raises NVMLError_LibraryNotFound, and without ROCm `import amdsmi` raises
KeyError('libamd_smi.so') after printing to stdout.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import io
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from artifact.core.errors import ArtifactError

log = logging.getLogger(__name__)

FIELDS = ("power_w", "power_instant_w", "energy_j", "sm_clock_mhz", "temp_c")
GPU_BACKENDS = ("nvml", "amdsmi")  # the order `open_gpu` tries them in


class Unavailable(Exception):
    """No backend could open the GPU; the message names each backend and its error."""


class Device(Protocol):
    name: str

    def read(self) -> tuple[float, ...]:
        """One value per FIELDS entry (NaN where the device has none)."""

    def power_limit_w(self) -> float:
        """The enforced power limit (the TDP the paper normalises by)."""

    def limit_range_w(self) -> tuple[float, float]: ...

    def management_limit_w(self) -> float:
        """The limit `set_power_limit_w` changes: what a cap saves and restores."""

    def set_power_limit_w(self, watts: float) -> None: ...

    def compute_pids(self) -> list[int]: ...

    def driver_version(self) -> str | None: ...

    def state(self) -> dict[str, object]: ...

    def close(self) -> None: ...


class NvmlDevice:
    name = "nvml"

    def __init__(self, index: int):
        import pynvml

        self._nv = pynvml
        pynvml.nvmlInit()
        self._h = pynvml.nvmlDeviceGetHandleByIndex(index)
        self._instant = getattr(pynvml, "NVML_FI_DEV_POWER_INSTANT", None)
        if self._instant is not None:  # older drivers lack the field: fall back to usage
            v = pynvml.nvmlDeviceGetFieldValues(self._h, [self._instant])[0]
            if v.nvmlReturn != pynvml.NVML_SUCCESS:
                self._instant = None

    def read(self) -> tuple[float, ...]:
        nv, h = self._nv, self._h
        power = nv.nvmlDeviceGetPowerUsage(h) / 1e3
        instant = float("nan")
        if self._instant is not None:
            instant = nv.nvmlDeviceGetFieldValues(h, [self._instant])[0].value.uiVal / 1e3
        energy = nv.nvmlDeviceGetTotalEnergyConsumption(h) / 1e3
        clock = nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM)
        temp = nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU)
        return (power, instant, energy, float(clock), float(temp))

    def power_limit_w(self) -> float:
        return self._nv.nvmlDeviceGetEnforcedPowerLimit(self._h) / 1e3

    def limit_range_w(self) -> tuple[float, float]:
        lo, hi = self._nv.nvmlDeviceGetPowerManagementLimitConstraints(self._h)
        return lo / 1e3, hi / 1e3

    def management_limit_w(self) -> float:
        return self._nv.nvmlDeviceGetPowerManagementLimit(self._h) / 1e3

    def set_power_limit_w(self, watts: float) -> None:
        self._nv.nvmlDeviceSetPowerManagementLimit(self._h, int(round(watts * 1e3)))

    def compute_pids(self) -> list[int]:
        """Processes running compute work on this GPU (any user's, where the driver says)."""
        return [p.pid for p in self._nv.nvmlDeviceGetComputeRunningProcesses(self._h)]

    def driver_version(self) -> str | None:
        version = self._nv.nvmlSystemGetDriverVersion()
        return version.decode() if isinstance(version, bytes) else str(version)

    def state(self) -> dict[str, object]:
        """Which GPU this is and how it is set (provenance): UUID and serial, the enforced
        power limit, the application clocks; a field the driver does not answer is None."""
        nv, h = self._nv, self._h
        return {
            "uuid": _asked(lambda: _text(nv.nvmlDeviceGetUUID(h))),
            "serial": _asked(lambda: _text(nv.nvmlDeviceGetSerial(h))),
            "power_limit_w": _asked(self.power_limit_w),
            "app_sm_clock_mhz": _asked(
                lambda: nv.nvmlDeviceGetApplicationsClock(h, nv.NVML_CLOCK_SM)
            ),
            "app_mem_clock_mhz": _asked(
                lambda: nv.nvmlDeviceGetApplicationsClock(h, nv.NVML_CLOCK_MEM)
            ),
        }

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._nv.nvmlShutdown()


class AmdSmiDevice:
    name = "amdsmi"

    def __init__(self, index: int):
        with contextlib.redirect_stdout(io.StringIO()):  # it prints when libamd_smi.so is absent
            import amdsmi
        self._a = amdsmi
        amdsmi.amdsmi_init()
        self._h = amdsmi.amdsmi_get_processor_handles()[index]

    def read(self) -> tuple[float, ...]:
        a, h = self._a, self._h
        p = a.amdsmi_get_power_info(h)
        power = float(p.get("current_socket_power") or p.get("average_socket_power") or "nan")
        e = a.amdsmi_get_energy_count(h)
        energy_uj = e.get("energy_accumulator", 0) * e.get("counter_resolution", 1.0)
        clock = a.amdsmi_get_clock_info(h, a.AmdSmiClkType.GFX).get("clk", float("nan"))
        temp = a.amdsmi_get_temp_metric(
            h, a.AmdSmiTemperatureType.EDGE, a.AmdSmiTemperatureMetric.CURRENT
        )
        return (power, power, energy_uj / 1e6, float(clock), float(temp))

    def power_limit_w(self) -> float:
        return float(self._a.amdsmi_get_power_cap_info(self._h)["power_cap"]) / 1e6

    def limit_range_w(self) -> tuple[float, float]:
        info = self._a.amdsmi_get_power_cap_info(self._h)
        return float(info["min_power_cap"]) / 1e6, float(info["max_power_cap"]) / 1e6

    def management_limit_w(self) -> float:
        return self.power_limit_w()  # AMD-SMI has one power cap: set and enforced

    def set_power_limit_w(self, watts: float) -> None:
        self._a.amdsmi_set_power_cap(self._h, 0, int(round(watts * 1e6)))

    def compute_pids(self) -> list[int]:
        procs = self._a.amdsmi_get_gpu_process_list(self._h)
        return [int(p["pid"] if isinstance(p, dict) else p.pid) for p in procs]

    def driver_version(self) -> str | None:
        return str(self._a.amdsmi_get_gpu_driver_info(self._h).get("driver_version"))

    def state(self) -> dict[str, object]:
        a, h = self._a, self._h
        return {
            "uuid": _asked(lambda: str(a.amdsmi_get_gpu_device_uuid(h))),
            "serial": _asked(lambda: str(a.amdsmi_get_gpu_board_info(h).get("product_serial"))),
            "power_limit_w": _asked(self.power_limit_w),
            "app_sm_clock_mhz": None,  # AMD-SMI has no application clocks
            "app_mem_clock_mhz": None,
        }

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._a.amdsmi_shut_down()


class NoDevice:
    """No GPU telemetry here (a CPU machine): every reading is NaN, and the report says so."""

    name = "none"

    def read(self) -> tuple[float, ...]:
        return (float("nan"),) * len(FIELDS)

    def power_limit_w(self) -> float:
        return float("nan")

    def limit_range_w(self) -> tuple[float, float]:
        return float("nan"), float("nan")

    def management_limit_w(self) -> float:
        return float("nan")

    def set_power_limit_w(self, watts: float) -> None:
        raise ArtifactError("no GPU power control on this machine")

    def compute_pids(self) -> list[int]:
        return []

    def driver_version(self) -> str | None:
        return None

    def state(self) -> dict[str, object]:
        return {}

    def close(self) -> None:
        pass


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _asked(read):
    """A state field, or None where the driver does not answer (NotSupported, no permission)."""
    try:
        return read()
    except Exception:  # every backend's own error types: a missing field is not a failure
        return None


_CLASSES: dict[str, type[NvmlDevice] | type[AmdSmiDevice]] = {
    "nvml": NvmlDevice,
    "amdsmi": AmdSmiDevice,
}


def physical_index(local_rank: int) -> int:
    """NVML/AMD-SMI index of a rank's GPU: NVML ignores CUDA_VISIBLE_DEVICES."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES") or os.environ.get("HIP_VISIBLE_DEVICES")
    if visible:
        entries = [v.strip() for v in visible.split(",")]
        if local_rank < len(entries) and entries[local_rank].isdigit():
            return int(entries[local_rank])
    return local_rank


def open_gpu(index: int = 0, backends: Sequence[str] = GPU_BACKENDS) -> Device:
    """GPU `index` through the first of `backends` that opens it.

    Raises Unavailable naming each backend's error ("nvml: NVMLError_LibraryNotFound (NVML
    Shared Library Not Found); amdsmi: KeyError ('libamd_smi.so')"); any exception counts,
    since neither library raises ImportError alone when its driver is missing.
    """
    errors = []
    for name in backends:
        try:
            return _CLASSES[name](index)
        except Exception as e:  # NVMLError_LibraryNotFound, KeyError('libamd_smi.so'), ...
            log.info("GPU backend %s unavailable: %s", name, e)
            said = str(e).strip()  # KeyError's is the missing library: "'libamd_smi.so'"
            errors.append(f"{name}: {type(e).__name__}" + (f" ({said})" if said else ""))
    raise Unavailable("; ".join(errors))


def amdsmi_versions() -> tuple[str, str, str | None] | None:
    """(the amdsmi Python package's version, the version of the libamd_smi it loads, the
    ROCm release in ROCM_PATH or None), or None where amdsmi cannot load its library.

    ROCm's own package (/opt/rocm/share/amd_smi) carries its library's version; the
    package index's copies carry the ROCm release they were made for (amdsmi 7.0.2: ROCm 7.0.2).
    """
    try:
        with contextlib.redirect_stdout(io.StringIO()):  # it prints when libamd_smi.so is absent
            import amdsmi
    except Exception:  # KeyError('libamd_smi.so'), OSError, ...
        return None
    try:
        lib = amdsmi.amdsmi_get_lib_version()  # a constant of the library
    except Exception:  # a library that wants amdsmi_init first
        try:
            amdsmi.amdsmi_init()
            lib = amdsmi.amdsmi_get_lib_version()
        except Exception:
            return None
        finally:
            with contextlib.suppress(Exception):
                amdsmi.amdsmi_shut_down()
    try:
        module = importlib.metadata.version("amdsmi")
    except importlib.metadata.PackageNotFoundError:  # a copy on sys.path, not installed
        module = getattr(amdsmi, "__version__", None)
    if module is None:
        return None
    library = ".".join(str(lib[k]) for k in ("major", "minor", "release"))
    info = Path(os.environ.get("ROCM_PATH") or "/opt/rocm") / ".info" / "version"
    try:
        rocm = info.read_text().strip() or None
    except OSError:
        rocm = None
    return str(module), library, rocm


def driver_version(backend: str) -> str | None:
    """The driver version `backend` ('nvml' or 'amdsmi') reports, or None where it cannot."""
    try:
        gpu = open_gpu(0, (backend,))
    except Unavailable:
        return None
    try:
        return gpu.driver_version()
    except Exception:  # an old binding or a driver that does not say: not an error here
        return None
    finally:
        gpu.close()
