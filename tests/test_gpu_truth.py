"""Tensor Core shares and totals on real H200 traces (tests/fixtures/h200, see its README).

The shares are pinned as computed by the rules; each family's verdict is spelled out below with
the reason, so a change to a rule shows up here as a changed figure with a named family. The
kernel-time totals are checked against an independent sum over the raw JSON.
"""

import gzip
import json
from pathlib import Path

import pytest

from profiler.analysis.run_analysis import RunAnalysis
from profiler.runs.command_targets import resolve_target
from profiler.trace.summary import summarize
from tests.conftest import FIXTURES

RUNS = FIXTURES / "h200" / "runs"

# run: (kernel µs over the 3 profiled steps, Tensor Core % of kernel time,
#       Tensor Core % of GEMM+conv time, µs with an "unknown" verdict)
PINNED = {
    "pytorch_fp32_bs8": (11898.664, 0.00, 0.00, 0.0),
    "pytorch_fp16_bs8": (3245.056, 42.13, 100.00, 0.0),
    "inductor_fp16_bs8": (2026.871, 69.66, 100.00, 0.0),
    "inductor_fp16_bs8_maxautotune": (2176.162, 64.54, 100.00, 0.0),
    "ttrt_fp32_bs8": (3609.997, 97.70, 100.00, 0.0),
    "ttrt_fp16_bs8": (2118.609, 91.00, 100.00, 0.0),
}

# (run, pattern in the full kernel name, verdict, why)
FAMILIES = [
    (
        "pytorch_fp32_bs8",
        "sm80_xmma_fprop_implicit_gemm_f32f32_f32f32",
        "no",
        "cuDNN xmma with FP32 inputs and FP32 math (TF32 off): CUDA cores",
    ),
    ("pytorch_fp32_bs8", "implicit_convolve_sgemm", "no", "cuDNN sgemm convolution: FFMA"),
    ("pytorch_fp32_bs8", "gemmSN_TN_kernel", "no", "cuBLAS small-N GEMM for the FC layer: FFMA"),
    ("pytorch_fp32_bs8", "cudnn::bn_fw_inf", "no", "batch norm: no matrix work"),
    (
        "pytorch_fp16_bs8",
        "sm90_xmma_fprop_implicit_gemm_f16f16",
        "yes",
        "cuDNN xmma with FP16 inputs: HMMA/GMMA",
    ),
    ("pytorch_fp16_bs8", "nvjet_sm90_hsh", "yes", "cuBLAS nvjet, first letter h = FP16 inputs"),
    (
        "pytorch_fp16_bs8",
        "cutlass__5x_cudnn",
        "yes",
        "cutlass tensorop s16816 kernels inside cuDNN",
    ),
    (
        "pytorch_fp16_bs8",
        "batch_norm_transform_input_channels_last",
        "no",
        "elementwise normalization",
    ),
    ("inductor_fp16_bs8", "triton_poi_fused", "no", "Inductor pointwise kernels: no tl.dot"),
    (
        "inductor_fp16_bs8_maxautotune",
        "triton_tem_fused",
        "yes",
        "Inductor template conv/mm: the name has no dtype; the run's result.json says FP16",
    ),
    (
        "ttrt_fp16_bs8",
        "cudnn_generated_fort_native_sm90_convFwd",
        "yes",
        "cuDNN runtime-fusion conv engines in the TensorRT engine",
    ),
    (
        "ttrt_fp16_bs8",
        "cudnn_generated_fort_native_sm90_matMul",
        "yes",
        "cuDNN runtime-fusion matmul engines (1x1 convs lowered to matmul)",
    ),
    (
        "ttrt_fp16_bs8",
        "__myl_",
        "no",
        "TensorRT Myelin kernels named after pointwise/data-movement ops only (ReshAddRelu, Resh, "
        "MoveConc, ReshAddMoveReluMean): no MMA; Nsight Compute read 0.5 % tensor pipe",
    ),
    ("ttrt_fp16_bs8", "cudnn_generated_resampleFwd", "no", "cuDNN resample (pooling)"),
]


def summary_of(run: str):
    target = resolve_target(str(RUNS / run))
    return target, summarize(target.path, RunAnalysis(target).context)


def raw_kernel_us(trace: Path) -> float:
    with gzip.open(trace, "rt") as handle:
        events = json.load(handle)["traceEvents"]
    return sum(e["dur"] for e in events if e.get("cat") == "kernel" and e.get("ph") == "X")


@pytest.mark.parametrize("run", sorted(PINNED))
def test_pinned_shares_and_totals(run):
    target, summary = summary_of(run)
    total, share, matrix_share, unknown = PINNED[run]
    kernels = summary.kernels
    assert kernels.total_kernel_us == pytest.approx(total, abs=0.01)
    assert kernels.total_kernel_us == pytest.approx(raw_kernel_us(target.path), rel=1e-9)
    assert 100 * kernels.tensor_core_share == pytest.approx(share, abs=0.01)
    assert 100 * kernels.tensor_core_share_of_matrix == pytest.approx(matrix_share, abs=0.01)
    assert kernels.tensor_core_unknown_us == pytest.approx(unknown, abs=0.01)
    assert len(summary.overview.steps) == 3  # CPU-side ProfilerStep#N only


@pytest.mark.parametrize(
    "run, pattern, verdict, why", FAMILIES, ids=[f"{r}:{p}" for r, p, _, _ in FAMILIES]
)
def test_kernel_family_verdicts(run, pattern, verdict, why):
    _, summary = summary_of(run)
    table = summary.kernels.table
    family = table[table["name"].str.contains(pattern, regex=False)]
    assert len(family), f"no {pattern} kernels in {run}"
    assert set(family["tensor_core"]) == {verdict}, (why, family[["kernel", "tensor_core_rule"]])


def test_run_context_is_what_decides_inductor_templates():
    target, with_context = summary_of("inductor_fp16_bs8_maxautotune")
    without = summarize(target.path)
    templates = without.kernels.table["name"].str.startswith("triton_tem_")
    assert set(without.kernels.table.loc[templates, "tensor_core"]) == {"unknown"}
    rules = with_context.kernels.table.loc[
        with_context.kernels.table["name"].str.startswith("triton_tem_"), "tensor_core_rule"
    ]
    assert all("run precision fp16" in rule for rule in rules)
    assert with_context.kernels.tensor_core_share > without.kernels.tensor_core_share


def test_kineto_occupancy_is_zero_above_48k_shared_memory_but_theoretical_is_not():
    _, summary = summary_of("ttrt_fp16_bs8")
    table = summary.kernels.table
    big = table[table["shared_memory_bytes"] > 48 * 1024]
    assert len(big) > 0
    assert (big["kineto_est_occupancy_pct"] == 0).all()
    assert (big["theoretical_occupancy_pct"] > 0).all()


@pytest.mark.parametrize(
    "precision, tf32, verdict",
    [("fp16", False, "yes"), ("bf16", False, "yes"), ("fp32", True, "yes"), ("fp32", False, "no")],
)
def test_context_rules_for_inductor_templates(precision, tf32, verdict):
    from profiler.trace.rules import RunContext, classify

    name = "triton_tem_fused_convolution_relu_26"
    assert classify(name).tensor_core == "unknown"
    decided = classify(name, RunContext(precision=precision, tf32=tf32, source="test"))
    assert decided.tensor_core == verdict
    # a name that already decides is not overridden by the context
    context = RunContext("fp16", False, "test")
    assert classify("triton_poi_fused_relu_0", context).tensor_core == "no"
