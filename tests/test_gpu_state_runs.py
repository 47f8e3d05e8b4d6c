"""The GPU state of the timed window in a run's record and views: result.json with and without
it (runs recorded before it was), the headlines that print it, and compare's explanation of why
two runs differ (the same kernels at another clock, or other kernels), on the committed H100
sweep's real run folders."""

from __future__ import annotations

import json
import shutil

import msgspec

from profiler import runs
from profiler.runs.gpu_record import GpuSample, GpuState
from tests.conftest import FIXTURES

SWEEP = FIXTURES / "h100_sweep" / "runs" / "gpu_sweep"
EAGER_BS8 = SWEEP / "pytorch_fp16_bs8"


def sample(mhz: int, reasons=()) -> GpuSample:
    return GpuSample(sm_clock_mhz=mhz, temperature_c=50, power_w=300.0, throttle_mask=0,
                     throttle_reasons=list(reasons))


def state(mhz: int, reasons=()) -> GpuState:
    return GpuState(device="NVIDIA H100 80GB HBM3", max_sm_clock_mhz=1980,
                    before=sample(mhz), after=sample(mhz, reasons), power_limited_ms=0.0,
                    thermal_limited_ms=0.0, load_average=(0.5, 0.4, 0.3), cpus=16)


def test_a_run_recorded_before_the_gpu_state_reads_and_writes_back_without_it():
    original = json.loads((EAGER_BS8 / "result.json").read_text())
    assert "gpu_state" not in original
    result = runs.read_result(EAGER_BS8)
    assert result.gpu_state is None
    assert "gpu_state" not in runs.result_to_dict(result)


def test_the_gpu_state_goes_into_result_json_and_back(tmp_path):
    recorded = msgspec.structs.replace(runs.read_result(EAGER_BS8),
                                       gpu_state=state(1755, ["sw_power_cap"]))
    written = runs.write_result(tmp_path, recorded)
    data = json.loads(written.read_text())
    assert list(data)[-1] == "gpu_state"  # appended: the keys before it keep their order
    assert data["gpu_state"]["before"]["sm_clock_mhz"] == 1755
    back = runs.read_result(written)
    assert back.gpu_state == recorded.gpu_state and back == recorded
    not_recorded = GpuState(not_recorded="no NVML", load_average=(1.0, 1.0, 1.0), cpus=2)
    written = runs.write_result(tmp_path, msgspec.structs.replace(recorded,
                                                                  gpu_state=not_recorded))
    assert runs.read_result(written).gpu_state == not_recorded
