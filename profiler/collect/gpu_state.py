"""The GPU's state around a timed window, from NVML (``nvidia-ml-py``, module ``pynvml``; the
``gpu-state`` extra): SM clock, clock event (throttle) reasons decoded to names, temperature and
power, read once before and once after the window, the time NVML counted the GPU held back by
its power or thermal limit in between, and the host's load average. Never raises: without the
module, a GPU or a working NVML, the record says why in one line (``GpuState.not_recorded``).

Cost, measured on an H100 (driver's NVML through nvidia-ml-py): one reading of clock,
temperature, power and reasons takes about 8 us; each violation-counter query about 0.9 ms, so a
window costs about 4 ms in all, before and after it, never inside the timed loop. NVML is
initialised once per process. An idle GPU reads its idle clock (345 MHz on that H100, reason
gpu_idle); right after work it still reads the busy clock, so GpuState.sm_clock_mhz leaves idle
readings out. A background thread
sampling during the window was left out on purpose: it would take the GIL from the thread that
launches the kernels and add the host jitter being measured; the power/thermal violation
counters cover what happens between the two readings instead.

Which GPU: ``device`` is a CUDA ordinal (mapped through CUDA_VISIBLE_DEVICES to NVML's index or
UUID), or a PCI bus id / UUID string; None for a run on the CPU (no GPU read, the host's load
still recorded). CUDA numbers GPUs fastest first unless
CUDA_DEVICE_ORDER=PCI_BUS_ID, so pass ``pci_bus_id(torch.cuda.get_device_properties(i))``:
torch gives the domain, bus and device numbers, NVML wants "00000000:00:06.0".
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from types import ModuleType
from typing import Any

import msgspec

from profiler.runs.gpu_record import GpuSample, GpuState

#: NVML's clock event (throttle) reason bits (nvml.h, nvmlClocksEventReason*)
THROTTLE_REASONS = (
    (0x1, "gpu_idle"),
    (0x2, "applications_clocks_setting"),
    (0x4, "sw_power_cap"),
    (0x8, "hw_slowdown"),
    (0x10, "sync_boost"),
    (0x20, "sw_thermal_slowdown"),
    (0x40, "hw_thermal_slowdown"),
    (0x80, "hw_power_brake_slowdown"),
    (0x100, "display_clock_setting"),
    (0x200, "board_limit"),
    (0x400, "reliability"),
)
_CLOCK_SM, _TEMPERATURE_GPU, _POLICY_POWER, _POLICY_THERMAL = 1, 0, 0, 1

_ready: dict[int, str | None] = {}  # id(NVML module) -> None once initialised, or why not


def decode_throttle_reasons(mask: int) -> list[str]:
    """The names of the bits set in an NVML clock event reason mask; unknown bits as hex."""
    names = [name for bit, name in THROTTLE_REASONS if mask & bit]
    rest = mask & ~sum(bit for bit, _ in THROTTLE_REASONS)
    return names + ([f"unknown_0x{rest:x}"] if rest else [])


def pci_bus_id(properties) -> str:
    """NVML's PCI bus id string from an object with ``pci_domain_id``, ``pci_bus_id`` and
    ``pci_device_id`` (torch's CUDA device properties)."""
    return (
        f"{properties.pci_domain_id:08X}:{properties.pci_bus_id:02X}:"
        f"{properties.pci_device_id:02X}.0"
    )


def _nvml() -> tuple[ModuleType | None, str | None]:
    """The initialised pynvml module, or why there is none."""
    try:
        nvml = importlib.import_module("pynvml")
    except ImportError:
        return None, "no NVML"
    if id(nvml) not in _ready:
        try:
            nvml.nvmlInit()
            _ready[id(nvml)] = None if nvml.nvmlDeviceGetCount() > 0 else "no GPU"
        except Exception as e:  # NVMLError_LibraryNotFound / DriverNotLoaded: no GPU here
            _ready[id(nvml)] = f"no GPU: {_one_line(e)}"
    return nvml, _ready[id(nvml)]


def _one_line(error: Exception) -> str:
    text = str(error).strip().splitlines()
    return text[0] if text else type(error).__name__


def _handle(nvml: ModuleType, device: int | str):
    if isinstance(device, str):
        if device.startswith(("GPU-", "MIG-")):
            return nvml.nvmlDeviceGetHandleByUUID(device)
        return nvml.nvmlDeviceGetHandleByPciBusId(device)
    visible = [
        v.strip() for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()
    ]
    if visible and device < len(visible):
        chosen = visible[device]
        if chosen.isdigit():
            return nvml.nvmlDeviceGetHandleByIndex(int(chosen))
        return nvml.nvmlDeviceGetHandleByUUID(chosen)
    return nvml.nvmlDeviceGetHandleByIndex(device)


def _query(call, *args):
    """One NVML query; None where the GPU does not support it or it fails."""
    try:
        return call(*args)
    except Exception:
        return None


def read_sample(nvml: ModuleType, handle) -> GpuSample:
    """One reading of the SM clock, temperature, power and clock event reasons."""
    reasons = (
        getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
        or nvml.nvmlDeviceGetCurrentClocksThrottleReasons
    )
    mask = _query(reasons, handle)
    power_mw = _query(nvml.nvmlDeviceGetPowerUsage, handle)
    return GpuSample(
        sm_clock_mhz=_query(nvml.nvmlDeviceGetClockInfo, handle, _CLOCK_SM),
        temperature_c=_query(nvml.nvmlDeviceGetTemperature, handle, _TEMPERATURE_GPU),
        power_w=None if power_mw is None else power_mw / 1000.0,
        throttle_mask=mask,
        throttle_reasons=[] if mask is None else decode_throttle_reasons(mask),
    )


def _violation_ns(nvml: ModuleType, handle, policy: int) -> int | None:
    status = _query(nvml.nvmlDeviceGetViolationStatus, handle, policy)
    return None if status is None else int(status.violationTime)


def _host_load() -> tuple[tuple[float, float, float] | None, int | None]:
    try:
        return os.getloadavg(), os.cpu_count()
    except (AttributeError, OSError):  # no load average on this platform
        return None, os.cpu_count()


class GpuWindow:
    """``with GpuWindow(device) as window: <timed loop>``, then ``window.state``: the GpuState
    of the window. Reads before on entry and after on exit; never raises."""

    def __init__(self, device: int | str | None = 0):
        self.device = device
        self.state = GpuState(not_recorded="not read yet")
        self._nvml: ModuleType | None = None
        self._handle: Any = None  # NVML's device handle
        self._before: GpuSample | None = None
        self._violations: tuple[int | None, int | None] = (None, None)

    def __enter__(self) -> GpuWindow:
        if self.device is None:  # a CPU run: no GPU to read, whatever NVML would find
            self.state = GpuState(not_recorded="no GPU")
            return self
        nvml, why_not = _nvml()
        if nvml is None or why_not is not None:  # no module: why_not says so
            self.state = GpuState(not_recorded=why_not)
            return self
        try:
            self._handle = _handle(nvml, self.device)
        except Exception as e:
            self.state = GpuState(not_recorded=f"no GPU {self.device!r}: {_one_line(e)}")
            return self
        self._nvml = nvml
        self._violations = (
            _violation_ns(nvml, self._handle, _POLICY_POWER),
            _violation_ns(nvml, self._handle, _POLICY_THERMAL),
        )
        self._before = read_sample(nvml, self._handle)
        return self

    def __exit__(self, *exc) -> None:
        load, cpus = _host_load()
        if self._nvml is None:
            self.state = msgspec.structs.replace(self.state, load_average=load, cpus=cpus)
            return
        nvml, handle = self._nvml, self._handle
        after = read_sample(nvml, handle)
        ends = (
            _violation_ns(nvml, handle, _POLICY_POWER),
            _violation_ns(nvml, handle, _POLICY_THERMAL),
        )
        spent = [
            None if start is None or end is None else (end - start) / 1e6
            for start, end in zip(self._violations, ends)
        ]
        name = _query(nvml.nvmlDeviceGetName, handle)
        self.state = GpuState(
            device=name.decode() if isinstance(name, bytes) else name,
            max_sm_clock_mhz=_query(nvml.nvmlDeviceGetMaxClockInfo, handle, _CLOCK_SM),
            before=self._before,
            after=after,
            power_limited_ms=spent[0],
            thermal_limited_ms=spent[1],
            load_average=load,
            cpus=cpus,
        )


def gpu_state_now(device: int | str | None = 0) -> GpuState:
    """One reading (before and after the same instant): for a run's header or a noise check."""
    with GpuWindow(device) as window:
        pass
    return window.state


def machine_settings(device: int | str = 0) -> dict[str, str | None]:
    """The settings that move a latency's noise floor, as found (never changed here): the GPU's
    persistence mode, its application (target) SM clock against the maximum, and the host's
    CPU frequency governor and the CPUs this process may run on. A value that cannot be read
    is None."""
    settings: dict[str, str | None] = {
        "persistence_mode": None,
        "sm_clock_target_mhz": None,
        "max_sm_clock_mhz": None,
    }
    nvml, why_not = _nvml()
    if nvml is not None and why_not is None:
        try:
            handle = _handle(nvml, device)
        except Exception:
            handle = None
        if handle is not None:
            mode = _query(nvml.nvmlDeviceGetPersistenceMode, handle)
            settings["persistence_mode"] = None if mode is None else ("on" if mode else "off")
            target = _query(nvml.nvmlDeviceGetApplicationsClock, handle, _CLOCK_SM)
            top = _query(nvml.nvmlDeviceGetMaxClockInfo, handle, _CLOCK_SM)
            settings["sm_clock_target_mhz"] = None if target is None else str(target)
            settings["max_sm_clock_mhz"] = None if top is None else str(top)
    try:
        governor_file = Path("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor")
        governor = governor_file.read_text().strip()
    except OSError:
        governor = None
    settings["cpu_governor"] = governor
    try:
        allowed = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        allowed = None
    settings["cpus_allowed"] = None if allowed is None else f"{allowed} of {os.cpu_count()}"
    return settings
