"""The GPU state of a timed window: without NVML, without a GPU, and from a fake pynvml with
known readings (no GPU on this machine)."""

import sys
import types

import msgspec
import pytest

from profiler.collect import gpu_state
from profiler.collect.gpu_state import GpuWindow, decode_throttle_reasons, gpu_state_now, pci_bus_id
from profiler.report.sentences import gpu_state_line
from profiler.runs.gpu_record import GpuSample, GpuState


class NVMLError(Exception):
    pass


def fake_nvml(
    clocks=(1980, 1755),
    temps=(40, 61),
    power_mw=(90_000, 650_000),
    reasons=(0x10, 0x1 | 0x4 | 0x40),
    count=1,
    init_error=None,
    no_power=False,
):
    """A pynvml stand-in whose readings step through the given (before, after) values."""
    calls = {"clock": 0, "temp": 0, "power": 0, "reasons": 0, "violation": 0, "init": 0}
    module = types.ModuleType("pynvml")
    module.NVMLError = NVMLError

    def step(key, values):
        value = values[min(calls[key], len(values) - 1)]
        calls[key] += 1
        return value

    def init():
        calls["init"] += 1
        if init_error:
            raise NVMLError(init_error)

    def power(handle):
        if no_power:
            raise NVMLError("Not Supported")
        return step("power", power_mw)

    def violation(handle, policy):  # power: 0 then 12 ms; thermal: 0 then 3 ms (in ns)
        calls["violation"] += 1
        after = calls["violation"] > 2
        return types.SimpleNamespace(
            referenceTime=0,
            violationTime=(12_000_000 if policy == 0 else 3_000_000) if after else 0,
        )

    module.nvmlInit = init
    module.nvmlDeviceGetCount = lambda: count
    module.nvmlDeviceGetHandleByIndex = lambda i: ("handle", i)
    module.nvmlDeviceGetHandleByUUID = lambda u: ("uuid", u)
    module.nvmlDeviceGetHandleByPciBusId = lambda b: ("bus", b)
    module.nvmlDeviceGetName = lambda h: b"NVIDIA H100 80GB HBM3"
    module.nvmlDeviceGetClockInfo = lambda h, kind: step("clock", clocks)
    module.nvmlDeviceGetMaxClockInfo = lambda h, kind: 1980
    module.nvmlDeviceGetTemperature = lambda h, sensor: step("temp", temps)
    module.nvmlDeviceGetPowerUsage = power
    module.nvmlDeviceGetCurrentClocksThrottleReasons = lambda h: step("reasons", reasons)
    module.nvmlDeviceGetViolationStatus = violation
    module.calls = calls
    return module


@pytest.fixture
def install(monkeypatch):
    def put(module):
        monkeypatch.setitem(sys.modules, "pynvml", module)
        monkeypatch.setattr(gpu_state, "_ready", {})
        return module

    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    return put


def test_decode_throttle_reasons():
    assert decode_throttle_reasons(0) == []
    assert decode_throttle_reasons(0x1) == ["gpu_idle"]
    assert decode_throttle_reasons(0x4 | 0x40) == ["sw_power_cap", "hw_thermal_slowdown"]
    assert decode_throttle_reasons(0x8 | 0x1000) == ["hw_slowdown", "unknown_0x1000"]


def test_no_nvml_is_one_line(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import fails
    state = gpu_state_now()
    assert state.not_recorded == "no NVML"
    assert gpu_state_line(state).startswith("GPU state: not recorded (no NVML)")
    assert "\n" not in gpu_state_line(state)
    assert state.sm_clock_mhz is None and state.throttle_reasons == []


def test_no_gpu(install):
    install(fake_nvml(init_error="NVML Shared Library Not Found"))
    state = gpu_state_now()
    assert state.not_recorded == "no GPU: NVML Shared Library Not Found"
    assert "not recorded (no GPU" in gpu_state_line(state)
    install(fake_nvml(count=0))
    assert gpu_state_now().not_recorded == "no GPU"


def test_window_reads_before_and_after(install):
    nvml = install(fake_nvml())
    with GpuWindow(0) as window:
        pass
    state = window.state
    assert state.not_recorded is None and state.device == "NVIDIA H100 80GB HBM3"
    assert (state.before.sm_clock_mhz, state.after.sm_clock_mhz) == (1980, 1755)
    assert state.sm_clock_mhz == 1980  # the idle reading left out
    assert state.max_sm_clock_mhz == 1980
    assert (state.before.temperature_c, state.after.temperature_c) == (40, 61)
    assert (state.before.power_w, state.after.power_w) == (90.0, 650.0)
    assert state.before.throttle_reasons == ["sync_boost"]
    assert state.after.throttle_reasons == ["gpu_idle", "sw_power_cap", "hw_thermal_slowdown"]
    # both readings' reasons, idle left out
    assert state.throttle_reasons == ["sync_boost", "sw_power_cap", "hw_thermal_slowdown"]
    assert (state.power_limited_ms, state.thermal_limited_ms) == (12.0, 3.0)
    assert state.cpus and len(state.load_average) == 3
    line = gpu_state_line(state)
    assert "SM 1980 of 1980 MHz" in line and "40 C -> 61 C" in line and "90 W -> 650 W" in line
    assert "throttle: sync_boost, sw_power_cap, hw_thermal_slowdown" in line
    # NVML is initialised once per process
    with GpuWindow(0):
        pass
    assert nvml.calls["init"] == 1
    # the record goes into JSON and back
    assert msgspec.json.decode(msgspec.json.encode(state), type=GpuState) == state


def test_unsupported_queries_are_none(install):
    install(fake_nvml(no_power=True))
    state = gpu_state_now()
    assert state.before.power_w is None and state.before.sm_clock_mhz == 1980
    assert "W" not in gpu_state_line(state).split("throttle")[0].split("MHz")[1]


def test_device_selection(install, monkeypatch):
    install(fake_nvml())
    chosen = []
    module = sys.modules["pynvml"]
    for name in (
        "nvmlDeviceGetHandleByIndex",
        "nvmlDeviceGetHandleByUUID",
        "nvmlDeviceGetHandleByPciBusId",
    ):
        monkeypatch.setattr(module, name, lambda d, name=name: chosen.append((name, d)) or d)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,1")
    gpu_state_now(1)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-abc")
    gpu_state_now(0)
    gpu_state_now("00000000:1B:00.0")
    assert chosen == [
        ("nvmlDeviceGetHandleByIndex", 1),
        ("nvmlDeviceGetHandleByUUID", "GPU-abc"),
        ("nvmlDeviceGetHandleByPciBusId", "00000000:1B:00.0"),
    ]


def test_missing_device_is_not_an_exception(install):
    nvml = install(fake_nvml())

    def missing(i):
        raise NVMLError("Invalid Argument")

    nvml.nvmlDeviceGetHandleByIndex = missing
    assert gpu_state_now(5).not_recorded == "no GPU 5: Invalid Argument"


def test_real_module_here_says_why():
    """The real pynvml (the dev extra) on this GPU-less machine: a record, not an exception."""
    pytest.importorskip("pynvml")
    state = gpu_state_now()
    if state.not_recorded is None:  # a machine with a GPU
        assert state.device and state.after is not None
    else:
        assert state.not_recorded.startswith("no GPU")


def test_idle_readings_do_not_stand_for_the_window_clock():
    """Measured on an H100: idle it reads 345 MHz (gpu_idle), busy 1980."""
    idle = GpuSample(sm_clock_mhz=345, throttle_reasons=["gpu_idle"])
    busy = GpuSample(sm_clock_mhz=1980, throttle_reasons=[])
    assert GpuState(before=idle, after=busy).sm_clock_mhz == 1980
    assert GpuState(before=idle, after=idle).sm_clock_mhz == 345


def test_pci_bus_id_from_torch_properties():
    props = types.SimpleNamespace(pci_domain_id=0, pci_bus_id=0x1B, pci_device_id=6)
    assert pci_bus_id(props) == "00000000:1B:06.0"


def test_a_cpu_run_reads_no_gpu_but_the_host_load(install):
    """GpuWindow(None), a run on the CPU: no GPU read even where NVML finds one."""
    install(fake_nvml())
    state = gpu_state_now(None)
    assert state.not_recorded == "no GPU" and state.before is None
    assert state.cpus and len(state.load_average) == 3
    assert gpu_state_line(state).startswith("GPU state: not recorded (no GPU); host load ")
    assert "\n" not in gpu_state_line(state)


def test_the_timed_window_reads_the_current_cuda_device_by_pci_bus_id(install, monkeypatch):
    """window.gpu_window: torch's current device, found in NVML by its PCI bus id (CUDA may
    number the GPUs otherwise); properties without PCI ids fall back to the ordinal."""
    torch = pytest.importorskip("torch")
    from profiler.collect import window

    nvml = install(fake_nvml())
    asked = []
    nvml.nvmlDeviceGetHandleByPciBusId = lambda bus: asked.append(("bus", bus)) or bus
    nvml.nvmlDeviceGetHandleByIndex = lambda i: asked.append(("index", i)) or i
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 1)
    props = types.SimpleNamespace(pci_domain_id=0, pci_bus_id=0x1B, pci_device_id=0)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i: props)
    with window.gpu_window(True) as gpu:
        pass
    assert asked == [("bus", "00000000:1B:00.0")]
    assert gpu.state.sm_clock_mhz == 1980 and gpu.state.throttle_reasons == [
        "sync_boost",
        "sw_power_cap",
        "hw_thermal_slowdown",
    ]
    monkeypatch.setattr(
        torch.cuda, "get_device_properties", lambda i: types.SimpleNamespace(name="no PCI ids")
    )
    with window.gpu_window(True):
        pass
    assert asked[-1] == ("index", 1)
    with window.gpu_window(False) as gpu:  # a CPU run
        pass
    assert gpu.state.not_recorded == "no GPU" and len(asked) == 2


def test_a_repeat_window_child_reports_the_gpu_state():
    """--repeat-runs' child (python -m profiler.collect.repeat_window) prints the state of its
    window beside its latencies, as JSON builtins."""
    pytest.importorskip("torch")
    from profiler.collect import repeat_window
    from profiler.runs.config import RunConfig

    done = repeat_window.time_once(
        RunConfig(model="tests.tiny_models:conv_net", batch_size=2, iters=3, timed_warmup=1)
    )
    assert len(done["latencies_ms"]) == 3
    state = msgspec.convert(done["gpu_state"], GpuState)
    assert state.not_recorded == "no GPU" and state.cpus
