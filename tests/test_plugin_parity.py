"""The V100 trace and the plugin's golden files: parsing, totals, and the plugin's GPU metrics."""

import json

import pytest

from profiler.trace.device_metrics import sm_efficiency_ranges, utilization_timeline
from profiler.trace.load import load_trace
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
    assert device.est_sm_efficiency_pct == pytest.approx(expected["est_sm_efficiency_pct"], abs=0.1)
    if expected["est_achieved_occupancy_pct"] is None:
        assert device.est_achieved_occupancy_pct is None
    else:
        assert device.est_achieved_occupancy_pct == pytest.approx(
            expected["est_achieved_occupancy_pct"], abs=0.1
        )
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
        kernels["ts"].to_numpy(),
        (kernels["ts"] + kernels["dur"]).to_numpy(),
        kernels["blocks_per_sm"].to_numpy(),
    )
    ours = []
    for s, e, v in zip(starts, ends, values):
        ours += [(s, 10 * v), (e, 0.0)]
    assert [(e["ts"], pytest.approx(e["args"]["Est. SM Efficiency"])) for e in expected] == ours


# ---- issue 22, point 3: the plugin's own step breakdown, reproduced ----------------------------

COMPAT_REFERENCE = json.loads(
    (PLUGIN_REFERENCE.parent / "plugin_reference_tbcompat.json").read_text()
)


def _assert_plugin_breakdown(summary, ref):
    steps = summary.overview.steps
    assert [s.removeprefix("ProfilerStep#") for s in steps["step"]] == ref["step_names"]
    for i, expected in enumerate(ref["step_breakdown_us"]):
        for role, value in expected.items():
            ours = float(steps["step_us" if role == "total" else role].iloc[i])
            assert ours == pytest.approx(value, abs=1e-3), (i, role)  # to the nanosecond
    for role, value in summary.overview.breakdown_us.items():
        assert value == pytest.approx(ref["avg_step_breakdown_us"][role], abs=1e-3), role


@pytest.mark.parametrize("fixture", [V100_TRACE, GOLDEN_INPUT])
def test_plugin_breakdown_on_the_plugins_samples_to_the_microsecond(fixture):
    _assert_plugin_breakdown(summarize(fixture, breakdown="plugin"), REFERENCE[fixture.name])
    # on these 2021 traces (no python_function, no annotations, no communication) both readings
    # agree
    _assert_plugin_breakdown(summarize(fixture), REFERENCE[fixture.name])


@pytest.mark.parametrize("ref", COMPAT_REFERENCE, ids=lambda r: r["file"][:20])
def test_plugin_breakdown_of_current_traces_as_the_plugin_reads_their_tb_compat_copy(ref):
    from .conftest import ROOT

    plugin = summarize(ROOT / ref["source"], breakdown="plugin")
    _assert_plugin_breakdown(plugin, ref)
    assert plugin.overview.definitions == "plugin"
    # this tool's reading counts the user_annotation (and python_function) spans as CPU exec:
    # the same instants the plugin calls "other"
    tool = summarize(ROOT / ref["source"]).overview
    moved = tool.breakdown_us["cpu_exec"] - plugin.overview.breakdown_us["cpu_exec"]
    assert moved > 1000
    assert tool.breakdown_us["other"] == pytest.approx(
        plugin.overview.breakdown_us["other"] - moved, abs=1e-3
    )


def test_communication_by_operator_for_the_plugin_by_name_for_this_tool(tmp_path):
    """A trace edited to hold an nccl:all_reduce operator whose kernel has an ordinary name,
    and an NCCL-named kernel launched by an ordinary operator."""
    import gzip

    with gzip.open(V100_TRACE) as f:
        raw = json.load(f)
    events = raw["traceEvents"]
    kernels = [e for e in events if e.get("ph") == "X" and e.get("cat") == "Kernel"]
    step = next(e for e in events if e.get("name") == "ProfilerStep#6")
    index = REFERENCE[V100_TRACE.name]["step_names"].index("6")
    window = summarize(V100_TRACE).overview.steps.iloc[index]
    inside = [
        k
        for k in kernels
        if window["start"] <= k["ts"] and k["ts"] + k["dur"] <= window["end"] and k["dur"] > 100
    ]
    by_op, by_name = inside[0], inside[-1]
    op = {
        "ph": "X",
        "cat": "Operator",
        "name": "nccl:all_reduce",
        "pid": step["pid"],
        "tid": step["tid"],
        "ts": step["ts"] + 1,
        "dur": 5,
        "args": {"External id": by_op["args"]["external id"]},
    }
    by_name["name"] = "ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)"
    path = tmp_path / "comm.pt.trace.json"
    path.write_text(json.dumps(dict(raw, traceEvents=events + [op])))
    tool = summarize(path).overview.steps.iloc[index]
    plugin = summarize(path, breakdown="plugin").overview.steps.iloc[index]
    assert tool["communication"] == pytest.approx(by_name["dur"])
    # the operator's kernel, and the part of its 5 µs CPU span no GPU work covers
    assert by_op["dur"] <= plugin["communication"] <= by_op["dur"] + 5


def test_summarize_prints_the_breakdown_definitions_side_by_side(cli):
    from .conftest import ROOT

    trace = ROOT / COMPAT_REFERENCE[1]["source"]
    tool = cli("summarize", str(trace), "--view", "definitions")
    assert tool.code == 0, tool
    assert "this tool" in tool.stdout and "Breakdown definitions" in tool.stdout
    assert "python_function" in tool.stdout and "cpu_op spans only" in tool.stdout
    plugin = cli("summarize", str(trace), "--view", "overview", "--json", "--breakdown", "plugin")
    data = json.loads(plugin.stdout)["overview"]
    assert data["breakdown_definitions"] == "plugin"
    assert data["breakdown_mean_us_per_step"]["cpu_exec"] == pytest.approx(
        COMPAT_REFERENCE[1]["avg_step_breakdown_us"]["cpu_exec"], abs=1e-3
    )
    bad = cli("summarize", str(trace), "--breakdown", "hta")
    assert bad.code == 2 and "unknown breakdown definitions 'hta'" in bad.stderr


# ---- the plugin's definitions where a trace is not like its samples --------------------------
# Committed traces edited in one way each; the expected figures follow from the plugin's code
# (torch-tb-profiler 0.4.3: trace.create_trace_event, event_parser.StepParser), as each test says.


def _edited(tmp_path, raw, events, name):
    path = tmp_path / f"{name}.pt.trace.json"
    path.write_text(json.dumps(dict(raw, traceEvents=events)))
    return path


def _load(path):
    import gzip

    with gzip.open(path) as f:
        return json.load(f)


H200_EAGER_NCU = next(
    (V100_TRACE.parent.parent / "h200_ncu" / "tb_logs" / "pytorch_fp16_bs8").glob(
        "*.pt.trace.json.gz"
    )
)


def test_a_dataloader_span_recorded_as_user_annotation_is_no_data_loading_for_the_plugin(tmp_path):
    """Current torch records ``enumerate(DataLoader)#...__next__`` as a user_annotation; 0.4.3's
    create_trace_event returns None for a user_annotation that is neither a step nor an
    nccl/gloo operator, so the span never reaches the breakdown. The V100 sample's six loader
    spans (category Operator there) recategorized: the plugin's data loading reads 0, the steps
    keep their length, and this tool still counts the spans as data loading."""
    raw = _load(V100_TRACE)
    events = [
        dict(e, cat="user_annotation")
        if str(e.get("name", "")).startswith("enumerate(DataLoader)#")
        else e
        for e in raw["traceEvents"]
    ]
    assert sum(e["cat"] == "user_annotation" for e in events if "cat" in e) == 6
    path = _edited(tmp_path, raw, events, "loader")
    ref = REFERENCE[V100_TRACE.name]
    plugin = summarize(path, breakdown="plugin").overview.steps
    assert (plugin["dataloader"] == 0).all()
    assert list(plugin["step_us"]) == pytest.approx(ref["step_us"])
    assert plugin[list(ROLES)].sum(axis=1).to_numpy() == pytest.approx(ref["step_us"])
    notes = summarize(path, breakdown="plugin").overview.notes
    assert any(n.startswith("6 DataLoader span(s) recorded as user_annotation") for n in notes)
    tool = summarize(path).overview.steps
    assert list(tool["dataloader"]) == pytest.approx(
        [s["dataloader"] for s in ref["step_breakdown_us"]]
    )


ROLES = (
    "kernel",
    "memcpy",
    "memset",
    "communication",
    "runtime",
    "dataloader",
    "cpu_exec",
    "other",
)


def test_a_stepless_trace_is_one_step_over_the_cpu_ops_for_the_plugin(tmp_path):
    """Without ProfilerStep spans the plugin makes one step of [cpu_min_ts, cpu_max_ts], which
    _parse_step takes from cpu_op (and old 'Python') events only; this tool's one step also
    covers user_annotation spans (here each step's ``inference_step`` span)."""
    raw = _load(H200_EAGER_NCU)
    events = [
        e for e in raw["traceEvents"] if not str(e.get("name", "")).startswith("ProfilerStep#")
    ]
    path = _edited(tmp_path, raw, events, "stepless")

    def span(cats):
        spans = [e for e in events if e.get("ph") == "X" and e.get("cat") in cats]
        return min(e["ts"] for e in spans), max(e["ts"] + e["dur"] for e in spans)

    (plugin,) = summarize(path, breakdown="plugin").overview.steps.itertuples()
    assert (plugin.cpu_start, plugin.cpu_end) == pytest.approx(span({"cpu_op"}), abs=1e-3)
    (tool,) = summarize(path).overview.steps.itertuples()
    assert (tool.cpu_start, tool.cpu_end) == pytest.approx(
        span({"cpu_op", "user_annotation", "python_function"}), abs=1e-3
    )
    assert tool.cpu_start < plugin.cpu_start


def test_step_zero_starts_after_gpu_work_no_step_launched(tmp_path):
    """A sampled trace: the V100 sample's first step span and its launch calls cut away, its
    kernels kept (as when the recording starts mid-step). The plugin's _find_device_steps
    moves step 0's start to the end of the last GPU event that no step launched and that ended
    before step 0's first GPU event, whether or not its launch was recorded; there the GPU was
    still running the cut step's kernels, so the new step 0 keeps the length the plugin gave
    ProfilerStep#6 in the whole trace."""
    raw = _load(V100_TRACE)
    steps = sorted(
        (e for e in raw["traceEvents"] if str(e.get("name", "")).startswith("ProfilerStep#")),
        key=lambda e: e["ts"],
    )
    first, second = steps[0], steps[1]

    def launched_in(step, e):
        return (
            e.get("cat") == "Runtime"
            and step["ts"] <= e["ts"]
            and e["ts"] + e["dur"] <= step["ts"] + step["dur"]
        )

    events = [e for e in raw["traceEvents"] if e is not first and not launched_in(first, e)]
    path = _edited(tmp_path, raw, events, "sampled")
    # step 0 is now ProfilerStep#6; its first GPU event is the earliest one launched in its span
    launched = {e["args"]["correlation"] for e in events if launched_in(second, e)}
    gpu = [e for e in events if e.get("cat") in ("Kernel", "Memcpy", "Memset")]
    first_gpu = min(e["ts"] for e in gpu if e["args"].get("correlation") in launched)
    earlier = max(
        e["ts"] + e["dur"]
        for e in gpu
        if e["ts"] + e["dur"] < first_gpu and e["args"].get("correlation") not in launched
    )
    assert earlier > second["ts"]  # the GPU was still busy with the cut step's kernels
    ref = REFERENCE[V100_TRACE.name]
    for definitions in ("plugin", "tool"):
        steps_now = summarize(path, breakdown=definitions).overview.steps
        assert steps_now["step"].iloc[0] == "ProfilerStep#6"
        assert steps_now["start"].iloc[0] == pytest.approx(earlier, abs=1e-3)
        assert list(steps_now["step_us"]) == pytest.approx(ref["step_us"][1:])
