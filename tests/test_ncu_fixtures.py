"""Name rules against Nsight Compute, on real H200 measurements (tests/fixtures/h200_ncu)."""

import csv
import gzip

import pytest

from profiler.analysis.run_analysis import RunAnalysis
from profiler.runs.command_targets import resolve_target
from profiler.runs.layout import ncu_csv_of
from profiler.trace.hardware import agreement_share, hardware_join, read_ncu_csv
from profiler.trace.summary import summarize
from tests.conftest import FIXTURES

RUNS = FIXTURES / "h200_ncu" / "runs"
# run: (launches in the CSV, kernels joined, kernel µs of those kernels, coverage of all kernel
# time)
PINNED = {
    "pytorch_fp16_bs8": (200, 11, 2377.249, 0.7536),
    "inductor_fp16_bs8": (53, 8, 999.167, 0.5245),
    "ttrt_fp16_bs8": (46, 10, 1691.411, 0.7949),
    "ttrt_fp32_bs8": (45, 10, 3134.935, 0.8705),
}


def joined(run: str, runs=RUNS):
    target = resolve_target(str(runs / run))
    summary = summarize(target.path, RunAnalysis(target).context)
    raw = read_ncu_csv(ncu_csv_of(str(runs / run)))
    table = hardware_join(summary.kernels.table, raw)
    return raw, table, agreement_share(table)


@pytest.mark.parametrize("run", sorted(PINNED))
def test_join_and_agreement(run):
    launches, kernels, profiled_us, coverage = PINNED[run]
    raw, table, agreement = joined(run)
    assert len(raw) == launches
    assert agreement.profiled_kernels == kernels
    assert agreement.profiled_us == pytest.approx(profiled_us, abs=0.01)
    assert agreement.coverage == pytest.approx(coverage, abs=1e-4)
    # every profiled kernel's name verdict matches the tensor pipe (>= 5 % yes, <= 2 % no)
    assert agreement.share == 1.0 and agreement.disagreeing == []


def test_agreement_over_the_three_backends_of_the_issue():
    """As a share of profiled kernel time over eager FP16, inductor_fp16 and ttrt_fp16: the issue
    asks for at least 95 %. (Before the Myelin rule, ttrt_fp16 read 94.9 %: __myl_ReshAddRelu
    was 'unknown'; ncu reads 0.5 % tensor pipe for it.)"""
    results = [joined(run)[2] for run in ("pytorch_fp16_bs8", "inductor_fp16_bs8", "ttrt_fp16_bs8")]
    agree = sum(a.agree_us for a in results)
    profiled = sum(a.profiled_us for a in results)
    assert agree / profiled >= 0.95


def test_computed_theoretical_occupancy_equals_nsight_compute():
    """Our occupancy calculator (registers, shared memory, block size, deviceProperties) against
    ncu's theoretical occupancy, kernel by kernel; Kineto's estimate reads 0 above 48 KB."""
    compared = 0
    for run in PINNED:
        _, table, _ = joined(run)
        profiled = table[table["rules_vs_hardware"] != "not profiled"]
        assert profiled["theoretical_occupancy_pct"].to_numpy() == pytest.approx(
            profiled["hw_theoretical_occupancy_pct"].to_numpy(), abs=0.01
        )
        big = profiled[profiled["shared_memory_bytes"] > 48 * 1024]
        assert (big["kineto_est_occupancy_pct"] == 0).all()
        assert (big["hw_achieved_occupancy_pct"] > 5).all()
        compared += len(profiled)
    assert compared == 39  # 31 before the signature join; each new one agrees too


def test_tensorrt_rtx_fp32_engines_run_on_tensor_cores():
    """ttrt_fp32 was built with TF32 off, yet every profiled kernel keeps the tensor pipe busy:
    TensorRT-RTX ran it as TF32 (docs/tensorrt.md)."""
    _, table, _ = joined("ttrt_fp32_bs8")
    profiled = table[table["rules_vs_hardware"] != "not profiled"]
    assert (profiled["hw_tensor_pipe_pct"] > 5).all()


def test_ncu_csv_with_unescaped_nvtx_quotes_still_parses():
    path = RUNS / "ttrt_fp16_bs8" / "ncu.csv.gz"
    lines = gzip.decompress(path.read_bytes()).decode().splitlines()
    width = len(next(csv.reader([lines[0]])))
    strict = [len(next(csv.reader([line]))) for line in lines[2:]]
    assert any(n != width for n in strict)  # a strict CSV reader misreads these records
    raw = read_ncu_csv(path)
    assert len(raw) == 46
    assert raw["Kernel Name"].str.startswith(("cudnn_generated_fort_native", "__myl_")).all()


def test_tensor_pipe_busy_beside_time_in_tensor_core_kernels():
    """Two readings over the same profiled kernels, kernel-time weighted: the pipe's busy share
    is far below the share of time in kernels that use Tensor Cores (H200 eager FP16), and each
    equals its recomputation from the joined table."""
    _, table, a = joined("pytorch_fp16_bs8")
    profiled = table[table["rules_vs_hardware"] != "not profiled"]
    time = profiled["total_us"]
    assert a.tensor_pipe_busy_share == pytest.approx(
        (time * profiled["hw_tensor_pipe_pct"]).sum() / 100 / time.sum()
    )
    assert a.tensor_core_kernels_share == pytest.approx(
        time[profiled["tensor_core"] == "yes"].sum() / time.sum()
    )
    assert a.tensor_pipe_busy_share == pytest.approx(0.0557, abs=5e-4)
    assert a.tensor_core_kernels_share == pytest.approx(0.2645, abs=5e-4)


def test_tensor_core_readings_weight_by_kernel_time():
    import pandas as pd

    from profiler.report.hardware_view import tensor_core_lines

    table = pd.DataFrame(
        {
            "name": ["gemm", "relu", "copy"],
            "total_us": [300.0, 100.0, 600.0],
            "tensor_core": ["yes", "no", "no"],
            "hw_tensor_pipe_pct": [40.0, 0.0, None],
            "rules_vs_hardware": ["agree", "agree", "not profiled"],
        }
    )
    a = agreement_share(table)
    assert a.tensor_core_kernels_share == pytest.approx(0.75)  # 300 of the 400 profiled µs
    assert a.tensor_pipe_busy_share == pytest.approx(0.30)  # 300 x 40 % / 400
    lines = tensor_core_lines(a)
    assert "2 profiled kernels (40.0 % of all kernel time)" in lines[0]
    assert "name rules): 75.0 %" in lines[1] and "kernel-time weighted): 30.0 %" in lines[2]


def test_summarize_prints_both_tensor_core_readings(cli):
    out = cli("summarize", str(RUNS / "ttrt_fp16_bs8"), "--view", "kernels").stdout
    assert "time in Tensor Core kernels (name rules): 94.9 %" in out
    assert "tensor pipe busy (ncu, kernel-time weighted): 32.5 %" in out


# the same kernels as Kineto's trace and ncu's CSV name them (H200 eager FP16 and H100 eager
# FP32 with TF32, the fixtures)
DEMANGLED_TWICE = [
    (
        "void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::"
        "batch_norm_calc_invstd(at::Tensor const&, at::Tensor const&, double)::{lambda()#1}::"
        "operator()() const::{lambda()#3}::operator()() const::{lambda(c10::Half)#1}, "
        "std::array<char*, 2ul> >(int, at::native::(anonymous namespace)::batch_norm_calc_invstd("
        "at::Tensor const&, at::Tensor const&, double)::{lambda()#1}::operator()() const::"
        "{lambda()#3}::operator()() const::{lambda(c10::Half)#1}, std::array<char*, 2ul>)",
        "void at::vectorized_elementwise_kernel<4, at::<unnamed>::batch_norm_calc_invstd(const "
        "at::Tensor &, const at::Tensor &, double)::[lambda() (instance 1)]::operator ()() const::"
        "[lambda() (instance 3)]::operator ()() const::[lambda(c10::Half) (instance 1)], "
        "std::array<char *, 2>>(int, T2, T3)",
    ),
    (
        "void at::native::vectorized_elementwise_kernel<8, at::native::CUDAFunctor_add<c10::Half>, "
        "std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<c10::Half>, "
        "std::array<char*, 3ul>)",
        "void at::vectorized_elementwise_kernel<8, at::CUDAFunctor_add<c10::Half>, "
        "std::array<char *, 3>>(int, T2, T3)",
    ),
    (
        "void cutlass__5x_cudnn::Kernel<cutlass_tensorop_f16_s16816fprop_optimized_f16_256x64_32x4"
        "_nhwc_align8>(cutlass_tensorop_f16_s16816fprop_optimized_f16_256x64_32x4_nhwc_align8::"
        "Params)",
        "void cutlass__5x_cudnn::Kernel<cutlass_tensorop_f16_s16816fprop_optimized_f16_256x64_32x4"
        "_nhwc_align8>(T1::Params)",
    ),
    (
        "void cudnn::engines_precompiled::nchwToNhwcKernel<float, float, float, false, true, "
        "(cudnnKernelDataType_t)0>(cudnn::engines_precompiled::nchw2nhwc_params_t<float>, "
        "float const*, float*)",
        "void engines_precompiled::nchwToNhwcKernel<float, float, float, 0, 1, 0>("
        "engines_precompiled::nchw2nhwc_params_t<T3>, const T1 *, T2 *)",
    ),
]


@pytest.mark.parametrize("kineto, ncu", DEMANGLED_TWICE)
def test_one_kernel_demangled_two_ways_joins(kineto, ncu):
    """Kineto and ncu demangle the same symbol differently (anonymous namespaces, lambdas,
    integer suffixes, const placement, dropped namespaces, parameters by template name); the
    join matches them, and does not match a kernel with other template arguments."""
    import pandas as pd

    from profiler.trace.hardware import hardware_table, signature_key

    assert signature_key(kineto) == signature_key(ncu)
    other = ncu.replace("<4,", "<8,").replace("add<", "mul<").replace("256x64", "128x128")
    other = other.replace(", 0, 1, 0>", ", 0, 1, 2>")
    assert signature_key(other) != signature_key(kineto)
    raw = pd.DataFrame(
        {
            "Kernel Name": [ncu, other],
            "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active": [1.0, 40.0],
            "gpu__time_duration.sum": [1000.0, 1000.0],
        }
    )
    table = pd.DataFrame({"name": [kineto], "total_us": [10.0], "tensor_core": ["no"]})
    joined = hardware_join(table, hardware_table(raw))
    assert list(joined["hw_kernel_name"]) == [ncu] and list(joined["hw_match"]) == ["signature"]
    assert list(joined["hw_tensor_pipe_pct"]) == [1.0]


def test_two_kernels_of_one_signature_do_not_join_by_it():
    """A signature shared by two ncu kernels is ambiguous: neither joins by it."""
    import pandas as pd

    from profiler.trace.hardware import hardware_table

    kineto, ncu = DEMANGLED_TWICE[1]
    respelled = ncu.replace("std::array<char *, 3>", "std::array<char*, 3u>")
    raw = pd.DataFrame(
        {"Kernel Name": [ncu, respelled], "gpu__time_duration.sum": [1000.0, 1000.0]}
    )
    table = pd.DataFrame({"name": [kineto], "total_us": [10.0], "tensor_core": ["no"]})
    assert list(hardware_join(table, hardware_table(raw))["hw_kernel_name"]) == [None]


TF32_RUNS = FIXTURES / "h100_ncu_tf32" / "runs"


def test_bool_and_enum_template_arguments_join_on_a_real_run():
    """ncu writes ``false, true, (cudnnKernelDataType_t)0`` as ``0, 1, 0``. On the H100 TF32 run
    the two cuDNN nchwToNhwcKernel kernels (enum 0 and 2) went unjoined (88.2 % coverage in its
    ncu_stdout.log); each joins its own ncu kernel now, and the join covers all kernel time."""
    raw, table, a = joined("pytorch_fp32_bs8", TF32_RUNS)
    assert len(raw) == 233
    transposes = table[table["name"].str.contains("nchwToNhwcKernel")]
    assert len(transposes) == 2
    assert sorted(transposes["hw_kernel_name"]) == [
        "void engines_precompiled::nchwToNhwcKernel<float, float, float, 0, 1, 0>("
        "engines_precompiled::nchw2nhwc_params_t<T3>, const T1 *, T2 *)",
        "void engines_precompiled::nchwToNhwcKernel<float, float, float, 0, 1, 2>("
        "engines_precompiled::nchw2nhwc_params_t<T3>, const T1 *, T2 *)",
    ]
    for name, hw_name in zip(transposes["name"], transposes["hw_kernel_name"]):
        assert name.split("(cudnnKernelDataType_t)")[1][0] == hw_name.split(">(")[0][-1]
    assert (transposes["hw_match"] == "signature").all()
    assert a.coverage == pytest.approx(1.0) and a.profiled_kernels == 23
    assert table["hw_kernel_name"].notna().all()
    assert a.share == 1.0 and a.disagreeing == []
    # the two readings over all kernel time, recomputed from the joined table
    time = table["total_us"]
    assert a.tensor_core_kernels_share == pytest.approx(
        time[table["tensor_core"] == "yes"].sum() / time.sum()
    )
    assert a.tensor_pipe_busy_share == pytest.approx(
        (time * table["hw_tensor_pipe_pct"]).sum() / 100 / time.sum()
    )


def test_signature_keeps_numeric_template_arguments_apart():
    """true -> 1 and (enum)N -> N, but 0 stays apart from 2 and from true."""
    from profiler.trace.hardware import signature_key

    kineto = DEMANGLED_TWICE[-1][0]
    assert signature_key(kineto).endswith("nchwToNhwcKernel<float,float,float,0,1,0>")
    assert signature_key(
        kineto.replace("(cudnnKernelDataType_t)0", "(cudnnKernelDataType_t)2")
    ) != signature_key(kineto)
    assert signature_key(kineto.replace("false, true", "true, true")) != signature_key(kineto)
