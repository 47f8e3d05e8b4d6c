"""Name rules against Nsight Compute, on real H200 measurements (tests/fixtures/h200_ncu)."""

import csv
import gzip

import pytest

from profiler.runs.layout import ncu_csv_of
from profiler.runs.targets import resolve_target
from profiler.trace.hardware import agreement_share, hardware_join, read_ncu_csv
from profiler.trace.summary import summarize
from profiler.analysis.run import RunAnalysis
from tests.conftest import FIXTURES

RUNS = FIXTURES / "h200_ncu" / "runs"
# run: (launches in the CSV, kernels joined, kernel µs of those kernels, coverage of all kernel time)
PINNED = {
    "pytorch_fp16_bs8": (200, 5, 1467.996, 0.4654),
    "inductor_fp16_bs8": (53, 6, 749.857, 0.3936),
    "ttrt_fp16_bs8": (46, 10, 1691.411, 0.7949),
    "ttrt_fp32_bs8": (45, 10, 3134.935, 0.8705),
}


def joined(run: str):
    target = resolve_target(str(RUNS / run))
    summary = summarize(target.path, RunAnalysis(target).context)
    raw = read_ncu_csv(ncu_csv_of(str(RUNS / run)))
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
            profiled["hw_theoretical_occupancy_pct"].to_numpy(), abs=0.01)
        big = profiled[profiled["shared_memory_bytes"] > 48 * 1024]
        assert (big["kineto_est_occupancy_pct"] == 0).all()
        assert (big["hw_achieved_occupancy_pct"] > 5).all()
        compared += len(profiled)
    assert compared == 31


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
