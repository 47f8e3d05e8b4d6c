"""The V100 trace and the plugin's golden files: parsing, totals, and the plugin's GPU metrics."""

import json

import pytest

from profiler.trace.load import load_trace
from profiler.trace.overview import sm_efficiency_ranges, utilization_timeline
from profiler.trace.summary import summarize

from .conftest import GOLDEN_EXPECTED, GOLDEN_INPUT, PLUGIN_REFERENCE, V100_TRACE

REFERENCE = {r["file"]: r for r in json.loads(PLUGIN_REFERENCE.read_text())}


def test_old_schema_trace_parses_with_sensible_totals(v100_summary):
    s = v100_summary
    assert s.schema.startswith("kineto-2021")
    assert s.event_counts["kernel"] == 8772 and s.event_counts["runtime"] == 11923
    assert s.event_counts["cpu_op"] == 23646
    assert len(s.overview.steps) == 6
    assert list(s.overview.steps["step"]) == [f"ProfilerStep#{i}" for i in range(5, 11)]
    assert s.kernels.total_kernel_us == pytest.approx(591532.0)
    assert s.kernels.table["calls"].sum() == 8772
    assert s.kernels.tensor_core_share == 0.0  # FP32 training on a V100: sgemm/scudnn kernels
    # every kernel is tied to the operator that launched it through correlation ids
    assert (s.kernels.table["top_operator"] != "(no operator)").all()
    top = s.kernels.table.iloc[0]
    assert top["kernel"] == "cudnn::detail::dgrad_engine"
    assert top["top_operator"] == "aten::cudnn_convolution_backward_input"


@pytest.mark.parametrize("fixture", [V100_TRACE, GOLDEN_INPUT])
def test_overview_matches_the_tensorboard_plugin(fixture):
    ref = REFERENCE[fixture.name]
    summary = summarize(fixture)
    (device,) = summary.overview.devices
    expected = ref["devices"][str(device.device)]
    assert device.gpu_utilization_pct == pytest.approx(expected["gpu_utilization_pct"], abs=0.1)
    assert device.est_sm_efficiency_pct == pytest.approx(expected["est_sm_efficiency_pct"],
                                                         abs=0.1)
    if expected["est_achieved_occupancy_pct"] is None:
        assert device.est_achieved_occupancy_pct is None
    else:
        assert device.est_achieved_occupancy_pct == pytest.approx(
            expected["est_achieved_occupancy_pct"], abs=0.1)
    steps = summary.overview.steps
    assert list(steps["step_us"]) == pytest.approx(ref["step_us"])
    for role, value in summary.overview.breakdown_us.items():
        assert value == pytest.approx(ref["avg_step_breakdown_us"][role], abs=0.5), role


def _counters(name):
    data = json.loads(GOLDEN_EXPECTED.read_text())
    return [e for e in data["traceEvents"] if e.get("ph") == "C" and e["name"] == name]


def test_golden_gpu_utilization_timeline():
    """gpu_metrics_expected.json holds the plugin's utilization track, scaled x100 for display
    (its test says so); after two baseline points (1 and 0) come the buckets."""
    expected = _counters("GPU 0 Utilization")[2:]
    ours = utilization_timeline(load_trace(GOLDEN_INPUT), device=0)
    assert [e["ts"] for e in expected] == [t for t, _ in ours]
    for e, (_, value) in zip(expected, ours):
        assert 100 * value == pytest.approx(e["args"]["GPU Utilization"], abs=1e-3)


def test_golden_sm_efficiency_track():
    """The SM-efficiency track: (start, value), (end, 0) per merged range, scaled x10."""
    expected = _counters("GPU 0 Est. SM Efficiency")[2:]
    trace = load_trace(GOLDEN_INPUT)
    kernels = trace.of_kind("kernel").join(trace.kernel_launch)
    starts, ends, values = sm_efficiency_ranges(
        kernels["ts"].to_numpy(), (kernels["ts"] + kernels["dur"]).to_numpy(),
        kernels["blocks_per_sm"].to_numpy())
    ours = []
    for s, e, v in zip(starts, ends, values):
        ours += [(s, 10 * v), (e, 0.0)]
    assert [(e["ts"], pytest.approx(e["args"]["Est. SM Efficiency"])) for e in expected] == ours
