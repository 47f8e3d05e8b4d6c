"""One H100 run of `bash scripts/device_session.sh numbers` (tests/fixtures/h100_session, see its
README): schema 2 result.json files with memory, engine memory, noise and roofline inputs; the
TensorRT layers view on a real trace; the bootstrap verdict on two identical runs; and the Tensor
Core share the overview printed on the GPU machine."""

import pytest

from profiler.analysis.headline import compare_timed
from profiler.analysis.run_analysis import RunAnalysis
from profiler.cli.app import main
from profiler.runs.command_targets import resolve_target
from profiler.runs.layout import engine_layer_files
from profiler.runs.result import read_result
from profiler.trace.load import load_trace
from profiler.trace.trt_layers import MIN_COVERAGE, attribute, read_layers
from tests.conftest import FIXTURES

SESSION = FIXTURES / "h100_session"
RUNS = SESSION / "runs"
TTRT = RUNS / "ttrt_fp16_bs8"


@pytest.mark.parametrize("run", ["pytorch_fp32_bs8", "pytorch_fp32_bs8_again", "ttrt_fp16_bs8"])
def test_result_files_read(run):
    result = read_result(RUNS / run / "result.json")
    assert result.run_name == run and result.batch_size == 8
    assert result.environment.gpu["name"] == "NVIDIA H100 80GB HBM3"
    assert result.timing.noise is not None and result.timing.noise.n == 100
    assert result.roofline_inputs.flops_per_batch > 0


def test_tensorrt_run_memory_noise_and_flops():
    result = read_result(TTRT / "result.json")
    assert result.memory.peak_allocated_bytes > 0
    assert result.memory.engine_device_memory_bytes > 0
    assert result.backend.engine_memory.engine_device_memory_bytes > 0
    assert result.timing.noise.cv < 0.1
    assert result.timing.noise.repeat_runs.runs == 3
    assert result.roofline_inputs.precision == "fp16"


def test_layers_view_attributes_the_engine_kernels():
    [(layers_path, times_path)] = engine_layer_files(TTRT)
    trace = load_trace(resolve_target(str(TTRT)).path)
    attribution = attribute(read_layers(layers_path, times_path), trace)
    assert attribution.method.startswith("launch order")
    assert attribution.calls == 3
    assert attribution.coverage >= MIN_COVERAGE
    assert attribution.engine_kernel_us == pytest.approx(2165.5, abs=0.1)  # numbers.log


def test_two_identical_runs_of_one_process_each_are_undecided(tmp_path):
    a = RUNS / "pytorch_fp32_bs8" / "result.json"
    b = RUNS / "pytorch_fp32_bs8_again" / "result.json"
    compared = compare_timed(read_result(a), read_result(b), a, b, floors_dir=tmp_path)
    verdict = compared.verdict
    # numbers.log: "p50 B / A = 1.005": one process each, so only a difference far beyond the
    # machine's floor could be called; the ratio itself is the medians'
    assert verdict.verdict == "undecided"
    assert f"{verdict.ratio:.3f}" == "1.005"
    assert verdict.processes_a == verdict.processes_b == 1
    assert verdict.floor_source == "default"


def test_tensor_core_share_matches_the_gpu_machine():
    summary = RunAnalysis(resolve_target(str(TTRT))).summary
    assert f"{100 * summary.kernels.tensor_core_share:.1f}" == "91.4"


def test_overview_prints_the_time_in_tensor_core_kernels(capsys):
    """Named for what it counts (a kernel that uses Tensor Cores at all counts whole); without
    an ncu join, one note says how to get the tensor pipe's busy share."""
    assert main(["summarize", str(TTRT), "--view", "overview"]) == 0
    out = capsys.readouterr().out
    line = next(ln for ln in out.splitlines() if "time in Tensor Core kernels" in ln)
    assert "91.4 %" in line
    assert "on Tensor Cores" not in out and "tensor pipe busy (ncu) " not in out
    assert " ".join(out.split()).count("`profile.py ncu` with the run's options") == 1
