"""The GPU's utilization over the timed window beside the profiled steps', each named, and GPU
compute worded as what it holds (the device's gaps between kernels) with the kernels' own time
per call and the gap beside it: summarize's headline, summary.md, the HTML page and compare.
On the committed H100 run with GPU compute measured; nothing is timed."""

import pytest

from profiler.analysis.headline import utilization
from profiler.analysis.run_analysis import RunAnalysis
from profiler.report.headline_view import gpu_compute_line

from .conftest import FIXTURES

RUN = FIXTURES / "h100_ncu_fp16" / "runs" / "pytorch_fp16_bs8"


@pytest.fixture(scope="module")
def run():
    return RunAnalysis(RUN)


def test_utilization_is_the_kernels_time_over_the_timed_p50_and_over_the_profiled_step():
    assert utilization(1000.0, 4.0, 8000.0) == (1.0, 25.0, 12.5)
    assert utilization(None, 4.0, 8000.0) == (None, None, None)  # no GPU work (a CPU trace)
    assert utilization(0.0, 4.0, 8000.0) == (None, None, None)
    assert utilization(1000.0, None, 8000.0) == (1.0, None, 12.5)


def test_the_headline_carries_both_utilizations_from_the_same_kernel_time(run):
    h = run.headline
    busy_ms = float(run.steps["gpu_busy_us"].mean()) / 1000
    assert h.kernel_ms_per_step == pytest.approx(busy_ms)
    assert h.gpu_utilization_timed_pct == pytest.approx(100 * busy_ms / h.timed.p50_ms)
    # the profiled steps' figure is the overview's own GPU utilization (whose span is the
    # steps' extent on the GPU's timeline: within 1 % of the mean step)
    [device] = run.summary.overview.devices
    assert h.gpu_utilization_profiled_pct == pytest.approx(device.gpu_utilization_pct, rel=1e-2)
    assert h.gpu_utilization_profiled_pct == pytest.approx(
        100 * busy_ms / h.profiled_step_ms, rel=1e-9
    )
    # on this eager run the profiler more than doubles the step: the two differ by that much
    assert h.gpu_utilization_timed_pct > 2 * h.gpu_utilization_profiled_pct


def test_gpu_compute_says_it_holds_the_device_gaps_and_puts_the_kernels_beside_it(run):
    h = run.headline
    gpu = h.timed.gpu_compute
    line = gpu_compute_line(gpu, h.timed.p50_ms, h.kernel_ms_per_step)
    assert "with the host's launch gaps excluded and the device's own gaps between kernels " in line
    gap = gpu.gpu_p50_ms - h.kernel_ms_per_step
    assert gap > 0
    assert line.endswith(
        f"; kernels {h.kernel_ms_per_step:.3f} ms per call (time with a kernel running, "
        f"profiled steps): {gap:.3f} ms of the GPU compute is the device's gaps between kernels"
    )
    # without a trace (the run's own line) no kernel time; kernels longer than GPU compute: said
    assert "kernels" not in gpu_compute_line(gpu, h.timed.p50_ms).split("included")[1]
    longer = gpu_compute_line(gpu, h.timed.p50_ms, gpu.gpu_p50_ms + 0.5)
    assert longer.endswith("more than the GPU compute (the profiled steps' kernels ran longer)")


def test_summarize_names_each_utilization_and_the_html_and_markdown_carry_them(cli, run):
    done = cli("summarize", str(RUN), "--view", "overview")
    assert done.code == 0, done.stderr
    text = " ".join(done.stdout.split())
    h = run.headline
    assert f"GPU utilization, timed window │ {h.gpu_utilization_timed_pct:.1f} % │" in text
    assert f"GPU utilization, profiled steps │ {h.gpu_utilization_profiled_pct:.1f} % │" in text
    assert "GPU 0 utilization, profiled steps │" in text  # the overview's row, named
    assert "of the GPU compute is the device's gaps between kernels" in text

    from profiler.report.export import headline_markdown
    from profiler.report.html import headline

    md = "\n".join(headline_markdown(h))
    assert f"- GPU utilization, timed window: {h.gpu_utilization_timed_pct:.1f} %" in md
    assert "- GPU compute p50 " in md
    page = headline(run.result, "A", run.result_json, h)
    assert "<th>GPU utilization, timed window</th>" in page
    assert "<th>GPU utilization, profiled steps</th>" in page
    assert "<th>GPU compute</th>" in page


def test_compare_names_what_gpu_compute_holds(cli):
    runs = FIXTURES / "h100_ncu_fp16" / "runs"
    done = cli(
        "compare", str(runs / "pytorch_fp16_bs8"), str(runs / "pytorch_fp16_bs8"), "--view", "timed"
    )
    assert done.code == 0, done.stderr
    assert "GPU compute p50 (device gaps between kernels included)" in done.stdout
