"""Why two runs of one config differ, on synthetic kernel tables and GPU states."""

import pandas as pd
import pytest

from profiler.analysis.difference import (
    CLOCK,
    CLOCK_AND_KERNELS,
    HOST,
    KERNEL_TIME,
    KERNELS,
    NONE,
    explain_difference,
)
from profiler.report.sentences import difference_lines
from profiler.runs.gpu_record import GpuSample, GpuState

CONV = "sm80_xmma_fprop_implicit_gemm_f32f32_tf32f32_f32_nhwckrsc_nchw"
GEMM = "ampere_sgemm_128x64_tn"
RELU = "void at::native::vectorized_elementwise_kernel<4, relu>"
WINOGRAD = "cudnn::winograd_nonfused::winogradForwardData4x4"
MEMSET = "memset_kernel"


def table(rows):
    return pd.DataFrame(rows, columns=["name", "calls", "total_us"])


A = table([(CONV, 100, 6000.0), (GEMM, 100, 3000.0), (RELU, 200, 1000.0)])


def state(mhz, reasons=()):
    sample = GpuSample(sm_clock_mhz=mhz, throttle_reasons=list(reasons))
    return GpuState(device="H100", before=sample, after=sample, max_sm_clock_mhz=1980)


def test_same_kernels_at_a_lower_clock():
    scale = 1980 / 1755
    b = A.assign(total_us=A["total_us"] * scale)
    result = explain_difference(A, b, state(1980), state(1755, ["gpu_idle", "sw_power_cap"]))
    assert result.cause == CLOCK
    assert result.added == [] and result.removed == []
    assert result.kernel_time_ratio == pytest.approx(scale)
    assert (result.clock_a_mhz, result.clock_b_mhz) == (1980, 1755)
    assert result.throttle_reasons_b == ["sw_power_cap"]  # idle left out
    line = difference_lines(result)[0]
    assert line.startswith("same kernels at a lower SM clock in B: 1755 MHz against 1980 MHz")
    assert "(-11.4 %)" in line and "+12.8 %" in line
    assert "throttle reasons in B: sw_power_cap" in line


def test_different_kernels_are_named():
    """cuDNN picked winograd in B instead of the implicit GEMM of A."""
    b = table([(WINOGRAD, 100, 7000.0), (GEMM, 100, 3000.0), (RELU, 200, 1000.0)])
    result = explain_difference(A, b, state(1980), state(1980))
    assert result.cause == KERNELS
    assert [k.name for k in result.added] == [WINOGRAD]
    assert [k.name for k in result.removed] == [CONV]
    assert result.added[0].share == pytest.approx(7000 / 11000)
    assert result.kernel_time_ratio == pytest.approx(1.0)  # GEMM and relu unchanged
    line = difference_lines(result)[0]
    assert line.startswith("different kernels (autotuning picked other algorithms?): B adds ")
    assert f"{WINOGRAD} (63.6 %)" in line and f"B drops {CONV} (" in line


def test_different_kernels_and_a_lower_clock():
    b = table([(WINOGRAD, 100, 7000.0), (GEMM, 100, 3300.0), (RELU, 200, 1100.0)])
    assert explain_difference(A, b, state(1980), state(1800)).cause == CLOCK_AND_KERNELS


def test_a_small_extra_kernel_is_listed_not_a_cause():
    b = pd.concat([A, table([(MEMSET, 1, 5.0)])], ignore_index=True)
    result = explain_difference(A, b, state(1980), state(1980))
    assert result.cause == NONE
    assert [k.name for k in result.added] == [MEMSET]
    assert difference_lines(result)[0] == (
        "kernel names differ only in small kernels (< 1 % of kernel time each): 1 added, 0 removed"
    )


def test_same_kernels_slower_at_the_same_clock():
    b = A.assign(total_us=A["total_us"] * 1.10)
    result = explain_difference(A, b, state(1980), state(1975))
    assert result.cause == KERNEL_TIME and result.kernel_time_moved
    assert "+10.0 % in B at the same clock" in difference_lines(result)[0]


def test_host_side_when_the_gpu_did_the_same():
    """More profiled steps in B (twice the calls and time): per call nothing changed."""
    b = A.assign(calls=A["calls"] * 2, total_us=A["total_us"] * 2)
    result = explain_difference(A, b, state(1980), state(1980), latency_ratio=1.2)
    assert result.kernel_time_ratio == pytest.approx(1.0)
    assert result.cause == HOST
    assert result.latency_ratio == 1.2 and not result.kernel_time_moved
    assert difference_lines(result)[-1] == (
        "same kernels, same kernel time: the latency difference (+20.0 %) is host-side "
        "(launch overhead, scheduling, other processes)"
    )
    assert explain_difference(A, b, state(1980), state(1980), latency_ratio=1.01).cause == NONE


def test_without_nvml_the_kernels_still_speak():
    b = A.assign(total_us=A["total_us"] * 1.2)
    absent = GpuState(not_recorded="no NVML")
    result = explain_difference(A, b, absent, None)
    assert result.cause == KERNEL_TIME
    assert result.clock_a_mhz is None
    lines = difference_lines(result)
    assert "an unrecorded clock" in lines[0]
    assert lines[-1] == "SM clock not recorded for A and B"
