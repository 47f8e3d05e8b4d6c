"""The ONNX Runtime, INT8 and FP8 backends on real H100 run folders and traces
(tests/fixtures/h100_engines, see its README): what the rules say about their kernels, which
operator launched ORT's kernels, the honest 0 % INT8 of a conv net, and their result.json files
(written before result.json became schema 2) read through profiler.runs.result."""

import gzip
import re

import pytest

from profiler.analysis.benchmark import compile_time
from profiler.analysis.run_analysis import RunAnalysis
from profiler.collect.backends import onnxruntime as ort_backend
from profiler.runs.command_targets import resolve_target
from profiler.runs.result import read_result
from profiler.trace.kernels import NO_OPERATOR
from profiler.trace.summary import summarize
from tests.conftest import FIXTURES

SWEEP = FIXTURES / "h100_engines" / "runs" / "engines_resnet50"
CELLS = ["ort_fp32_bs8", "ort_fp16_bs8", "inductor_int8_bs8", "ttrt_fp8_bs8"]


def summary_of(cell: str):
    target = resolve_target(str(SWEEP / cell))
    return summarize(target.path, RunAnalysis(target).context)


def verdicts(cell: str, pattern: str) -> set[str]:
    """The Tensor Core verdicts of the cell's kernels whose full name matches ``pattern``."""
    table = summary_of(cell).kernels.table
    matched = table[table["name"].str.contains(pattern, regex=True)]
    assert len(matched), f"no kernel matches {pattern!r} in {cell}"
    return set(matched["tensor_core"])


@pytest.mark.parametrize("cell", CELLS)
def test_schema_1_result_files_read(cell):
    result = read_result(SWEEP / cell / "result.json")
    assert result.backend.name == cell.removesuffix("_bs8")
    assert result.timing.p50_ms > 0 and result.batch_size == 8
    assert result.environment.gpu["name"] == "NVIDIA H100 80GB HBM3"


# (cell, pattern in the full kernel name, verdict, why)
FAMILIES = [
    (
        "ort_fp32_bs8",
        r"sm80_xmma_fprop_implicit_gemm_f32f32",
        {"no"},
        "cuDNN FP32 FFMA convolutions: use_tf32 is off for ort_fp32",
    ),
    (
        "ort_fp32_bs8",
        r"onnxruntime::cuda::_(?:Unary|BinaryElementWise)",
        {"no"},
        "ORT's own Relu and Add kernels",
    ),
    (
        "ort_fp16_bs8",
        r"implicit_convolve_sgemm<__half",
        {"no"},
        "legacy cuDNN FP16 convolution on the CUDA cores",
    ),
    ("ort_fp16_bs8", r"sm90_xmma_fprop_implicit_gemm_f16f16", {"yes"}, "cuDNN FP16 xmma: GMMA"),
    (
        "ort_fp16_bs8",
        r"nchwToNhwcKernel|nhwcToNchwKernel",
        {"no"},
        "the layout transposes ORT's NCHW graph costs on cuDNN's NHWC kernels",
    ),
    ("ttrt_fp8_bs8", r"^__myl_\w*Cast", {"no"}, "Myelin pointwise + FP8 cast kernels"),
    (
        "ttrt_fp8_bs8",
        r"cudnn_generated_fort_native_sm90_(?:matMul|convFwd)",
        {"yes"},
        "cuDNN runtime-fusion engines; the data type is not in the name",
    ),
]


@pytest.mark.parametrize("cell,pattern,verdict,why", FAMILIES)
def test_rules_on_the_new_backends_kernels(cell, pattern, verdict, why):
    assert verdicts(cell, pattern) == verdict, why


def test_ort_fp32_runs_nothing_on_the_tensor_cores():
    assert summary_of("ort_fp32_bs8").kernels.tensor_core_us == 0


@pytest.mark.parametrize("cell", ["ort_fp32_bs8", "ort_fp16_bs8"])
def test_every_ort_kernel_is_attributed_to_the_onnxruntime_operator(cell):
    # ORT's launches carry no External id: the kernels link to the record_function that
    # encloses the launch call on its thread
    operators = summary_of(cell).overview.operators.set_index("operator")
    total = summary_of(cell).kernels.total_kernel_us
    assert NO_OPERATOR not in operators.index
    assert operators.loc[ort_backend.RECORD_FUNCTION, "kernel_us"] == pytest.approx(total)
    assert operators.loc[ort_backend.RECORD_FUNCTION, "calls"] == 3  # one per profiled step


def test_inductor_int8_on_resnet50_runs_no_int8():
    # ResNet50's only Linear (fc, 8 rows) is below torch._int_mm's 17-row minimum and the
    # convolutions stay in BF16: the notes say 0 %, and the kernels agree
    extra = read_result(SWEEP / "inductor_int8_bs8" / "result.json").backend.extra
    assert extra["int8_flop_share"] == 0.0 and extra["int8_layers"] == []
    assert extra["base_dtype"] == "bfloat16"
    names = summary_of("inductor_int8_bs8").kernels.table["name"]
    assert not names.str.contains(r"i\d{4,6}gemm_s8|_int_mm|imma|igemm", regex=True).any()


def test_compile_column_says_what_was_compiled():
    def what(cell):
        return compile_time(read_result(SWEEP / cell / "result.json"))[1]

    assert what("ort_fp32_bs8") == what("ort_fp16_bs8") == "ONNX export + session"
    assert what("ttrt_fp8_bs8") == "ModelOpt extension + TensorRT engine build"
    assert what("inductor_int8_bs8") == "first call (torch.compile)"
    assert (
        compile_time(read_result(FIXTURES / "h200" / "runs" / "ttrt_fp16_bs8" / "result.json"))[1]
        == "TensorRT engine build"
    )


def test_ort_fp16_log_lines_are_counted_not_printed():
    text = (SWEEP / "ort_fp16_bs8" / "sweep_cell.log").read_text()
    digest = ort_backend.log_digest(text)
    assert digest["lines_by_level"]["E"] == 96
    assert digest["most_repeated"] == (
        "96 x [cudnn_frontend] Error: No execution plans support the graph."
    )


def test_node_placement_from_the_real_ort_profile(tmp_path):
    profile = tmp_path / "ort_profile.json"
    with gzip.open(SWEEP / "ort_fp16_bs8" / "ort_profile.json.gz", "rb") as packed:
        profile.write_bytes(packed.read())
    placement = ort_backend.node_placement(profile)
    notes = read_result(SWEEP / "ort_fp16_bs8" / "result.json").backend.extra
    assert (
        placement["nodes_per_provider"]
        == notes["nodes_per_provider"]
        == {"CUDAExecutionProvider": 122}
    )
    assert placement["cpu_nodes"] == []


def test_fixture_traces_stay_small():
    for trace in (FIXTURES / "h100_engines").rglob("*.gz"):
        assert trace.stat().st_size < 1_000_000, trace
        assert re.search(r"\.(?:pt\.trace\.)?json\.gz$", trace.name)


DISTILBERT_INT8 = FIXTURES / "h100_engines" / "runs" / "engines_distilbert" / "inductor_int8_bs12"


def test_inductor_int8_on_distilbert_runs_its_linear_layers_on_int8_tensor_cores():
    # DistilBERT bs 12, seq 64: every token Linear quantized (36 layers, 99.98 % of the Linear
    # FLOPs); the two head layers have 12 rows, below torch._int_mm's minimum, and stay BF16.
    # The trace proves it: cutlass's IMMA kernels (i16832gemm_s8) hold 44 % of kernel time and
    # the rules count them as Tensor Core work.
    extra = read_result(DISTILBERT_INT8 / "result.json").backend.extra
    assert len(extra["int8_layers"]) == 36 and extra["int8_linear_flop_share"] > 0.999
    assert set(extra["fp_layers"]) == {"model.pre_classifier", "model.classifier"}
    target = resolve_target(str(DISTILBERT_INT8))
    table = summarize(target.path, RunAnalysis(target).context).kernels.table
    imma = table[table["name"].str.contains("tensorop_i16832gemm_s8", regex=False)]
    assert len(imma) == 2 and set(imma["tensor_core"]) == {"yes"}
    assert 0.40 < imma["total_us"].sum() / table["total_us"].sum() < 0.48


def test_a_cell_whose_output_is_nan_is_flagged_not_quoted():
    # ttrt_fp8 on ResNet50 finished on the H100 with a NaN output: the sweep says so
    from profiler.analysis.benchmark import NOT_FINITE, benchmark_frame, benchmark_rows
    from profiler.report.benchmark_view import markdown
    from profiler.runs.manifest import SweepCell, SweepManifest
    from profiler.sweep.record import describe

    cells = {
        c: SweepCell(backend=c.removesuffix("_bs8"), batch_size=8, status="ok")
        for c in ("ort_fp16_bs8", "ttrt_fp8_bs8")
    }
    manifest = SweepManifest(
        options={},
        model="resnet50",
        baseline="ort_fp16",
        backends=["ort_fp16", "ttrt_fp8"],
        batch_sizes=[8],
        cells=cells,
    )
    rows = benchmark_rows(SWEEP, manifest)
    frame = benchmark_frame(rows, manifest)
    assert list(frame["reason"]) == ["", NOT_FINITE]
    assert list(frame["status"]) == ["ok", "ok"]
    text = markdown(rows, manifest)
    assert "## Cells whose output holds NaN or Inf" in text and "- `ttrt_fp8` bs 8" in text
    assert "warning: the output holds NaN or Inf" in describe(
        SWEEP, "ttrt_fp8_bs8", cells["ttrt_fp8_bs8"]
    )
    assert "warning" not in describe(SWEEP, "ort_fp16_bs8", cells["ort_fp16_bs8"])
