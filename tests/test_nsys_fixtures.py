"""nsys stats CSVs captured on an H200 (tests/fixtures/h200_nsys) parse into the kernel table."""

import json

from profiler.tools.nsys import kernel_table_from_kern_sum, nvtx_table_from_nvtx_sum
from tests.conftest import FIXTURES

NSYS = FIXTURES / "h200_nsys"


def test_kernel_summary_parses_into_the_kernel_table():
    table = kernel_table_from_kern_sum((NSYS / "nsys_stats_cuda_gpu_kern_sum.csv").read_text())
    recorded = json.loads((NSYS / "nsys.json").read_text())
    assert len(table) == recorded["kernels"] == 25
    assert table["total_us"].sum() == round(recorded["kernel_time_us"], 3)
    assert abs(table["share_pct"].sum() - 100.0) < 1e-6
    top = table.iloc[0]
    assert top["kernel"] == "at::native::batch_norm_transform_input_channels_last_kernel"
    assert top["calls"] == 159 and top["tensor_core"] == "no"
    # the same rules as for Kineto names: cuDNN's FP16 xmma and cuBLAS' nvjet hsh are Tensor Core
    tc = table[table["tensor_core"] == "yes"]["name"]
    assert tc.str.contains("xmma_fprop_implicit_gemm_f16f16").any()
    assert tc.str.startswith("nvjet_sm90_hsh").any()


def test_nvtx_summary_has_the_three_profiled_steps():
    table = nvtx_table_from_nvtx_sum((NSYS / "nsys_stats_nvtx_sum.csv").read_text())
    assert list(table["range"]) == [
        "infer-profiler:step 2",
        "infer-profiler:step 3",
        "infer-profiler:step 4",
    ]
    assert (table["instances"] == 1).all() and (table["total_us"] > 1000).all()
