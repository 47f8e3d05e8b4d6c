"""Kernels inside CUDA graphs attributed to the operators that launched them at capture
(profiler.trace.graphs), on real H200 traces of a Llama decode step: the capture, profiled, and
three replays (tests/fixtures/llm_h200/capture/README.md)."""

import pytest

from profiler.errors import UserError
from profiler.trace import graphs
from profiler.trace.kernels import kernel_rows, kernel_summary
from profiler.trace.load import load_trace
from profiler.trace.operators import operator_table
from profiler.trace.summary import summarize_trace
from tests.conftest import FIXTURES

CAPTURE = FIXTURES / "llm_h200" / "capture"


@pytest.fixture(scope="module")
def captured():
    return {
        bs: graphs.captures_of(load_trace(CAPTURE / f"graph_capture_bs{bs}.json.gz"))
        for bs in (1, 8)
    }


def _replay(bs: int):
    return load_trace(CAPTURE / f"graph_replay_bs{bs}.json.gz")


def test_the_capture_is_its_launch_calls_in_order_with_their_operators(captured):
    for found in captured.values():
        (capture,) = found.captures
        # 816 launch calls in the profile, 2 of them (fill_) before the capture began
        assert len(capture.nodes) == 814 and capture.ran_outside == 0
        kinds = capture.kinds
        assert kinds.count("memset") == 1 and kinds.count("kernel") == 813
        assert capture.nodes[0].operator == "aten::index_select"  # the embedding comes first
        assert {"aten::mm", "aten::_cudnn_attention_forward"} <= set(capture.operators)
        assert graphs.NO_OPERATOR not in capture.operators


def test_every_replayed_kernel_carries_its_capture_operator(captured):
    for bs in (1, 8):
        trace = _replay(bs)
        before = kernel_rows(trace)
        assert set(trace.names[before["operator_id"].to_numpy()]) == {"decode"}  # the span only
        found = graphs.attach(trace, captured[bs])
        assert (found.replays, found.attributed_replays, found.unattributed) == (3, 3, {})
        assert found.attributed_kernel_us == found.replay_kernel_us > 0
        rows = kernel_rows(trace)
        ops = trace.names[rows["operator_id"].to_numpy()]
        assert "decode" not in set(ops) and len(rows) == 3 * 813
        # the n-th kernel of each replay carries the n-th node's operator
        kernel_ops = [n.operator for n in captured[bs].captures[0].nodes if n.kind == "kernel"]
        for replay in range(3):
            in_order = rows.sort_values("ts")["operator_id"].to_numpy()[
                replay * 813 : (replay + 1) * 813
            ]
            assert list(trace.names[in_order]) == kernel_ops
        table = kernel_summary(trace, rows).table.set_index("name")
        gemms = table[table.index.str.startswith("nvjet")]
        assert len(gemms) and set(gemms["top_operator"]) == {"aten::mm"}


def test_the_operator_view_lists_operators_seen_only_at_capture(captured):
    trace = _replay(1)
    graphs.attach(trace, captured[1])
    table = operator_table(trace, kernel_rows(trace)).set_index("operator")
    mm = table.loc["aten::mm"]
    assert mm["calls"] == 0 and mm["cpu_total_us"] == 0 and mm["kernels"] == 3 * 129
    assert table.loc["decode", "kernels"] == 0 and table.loc["decode", "calls"] == 3
    total = float(kernel_rows(trace)["dur"].sum())
    assert table["kernel_us"].sum() == pytest.approx(total)


def test_the_summary_says_how_much_was_attributed(captured):
    bare = summarize_trace(_replay(8))
    assert bare.graphs.attributed_pct == 0 and bare.graphs.replays == 3
    assert "carry no operator" in bare.notes[-1] and "graph_captures.json" in bare.notes[-1]
    trace = _replay(8)
    graphs.attach(trace, captured[8])
    summary = summarize_trace(trace)
    assert summary.graphs.attributed_pct == pytest.approx(100.0)
    assert summary.graphs.replayed_pct == pytest.approx(100.0)
    assert "100.0 % of their kernel time attributed" in summary.notes[-1]
    assert summary.to_dict()["graphs"]["attributed_kernels"] == 3 * 813


def test_a_replay_no_capture_fits_stays_on_its_launch(captured):
    (capture,) = captured[1].captures
    shorter = graphs.GraphCaptures((graphs.GraphCapture(capture.nodes[1:]),))
    trace = _replay(1)
    found = graphs.attach(trace, shorter)
    assert found.attributed_replays == 0 and found.unattributed == {
        "no capture of 814 launches in this order": 3
    }
    assert set(trace.names[kernel_rows(trace)["operator_id"].to_numpy()]) == {"decode"}


def test_captures_of_one_shape_are_told_apart_by_the_kernel_names(captured):
    (capture,) = captured[1].captures
    trace = _replay(1)
    names = trace.names[kernel_rows(trace).sort_values("ts")["name_id"].to_numpy()[:813]]
    # another capture of the same kinds whose operators name the replayed kernels, as an
    # Inductor Triton launch's range does: it wins over the real one
    named = list(names)
    nodes, k = [], 0
    for node in capture.nodes:
        if node.kind == "kernel":
            nodes.append(graphs.GraphNode("kernel", str(named[k])))
            k += 1
        else:
            nodes.append(node)
    by_name = graphs.GraphCapture(tuple(nodes))
    found = graphs.attach(trace, graphs.GraphCaptures((capture, by_name)))
    assert found.attributed_replays == 3
    # two captures that both fit and name nothing: not attributed, said so
    other = graphs.GraphCapture(tuple(graphs.GraphNode(n.kind, "x") for n in capture.nodes))
    trace = _replay(1)
    found = graphs.attach(trace, graphs.GraphCaptures((capture, other)))
    assert found.attributed_replays == 0
    assert found.unattributed == {"2 captures of 814 launches fit equally": 3}


def test_graph_captures_json_round_trips_and_a_bad_one_is_one_line(captured, tmp_path):
    path = tmp_path / "graph_captures.json"
    path.write_bytes(captured[8].to_json())
    assert graphs.read_captures(path) == captured[8]
    path.write_text('{"captures": [{"nodes": 3}]}')
    with pytest.raises(UserError, match="is not a graph captures file"):
        graphs.read_captures(path)


def test_node_kinds_follow_the_launch_api():
    assert graphs.node_kind("cudaLaunchKernel") == graphs.node_kind("cuLaunchKernelEx") == "kernel"
    assert graphs.node_kind("cudaLaunchKernelExC") == "kernel"
    assert graphs.node_kind("cudaMemsetAsync") == graphs.node_kind("cuMemsetD32Async") == "memset"
    assert graphs.node_kind("cudaMemcpyAsync") == "memcpy"
    for none in ("cudaLaunchHostFunc", "cudaMemcpy", "cudaStreamIsCapturing", "cudaGraphLaunch"):
        assert graphs.node_kind(none) is None


def test_a_trace_without_captures_or_replays_has_no_graph_record():
    eager = next((FIXTURES / "h200").rglob("*.pt.trace.json.gz"))
    trace = load_trace(eager)
    assert graphs.captures_of(trace).captures == ()
    summary = summarize_trace(trace)
    assert summary.graphs is None and "graphs" not in summary.to_dict()
    assert not any(note.startswith("CUDA graphs") for note in summary.notes)


def test_the_attribution_agrees_with_an_eager_run_of_the_same_step():
    """The capture method against an eager decode step of the same model (8 steps, from the
    same H200 session's facts script): the same kernel names carry the same operators, and each
    operator's kernel time per step is within a few per cent (scripts/graph_attribution_check.py
    prints the table: docs/gpu/h200/llm/graph_attribution_check.log)."""
    from profiler.analysis.run_analysis import RunAnalysis
    from profiler.trace.phase_kernels import attribute, launch_times, phase_spans

    def decode(trace):
        spans = phase_spans(trace, ["decode"])
        rows = kernel_rows(trace)
        return trace, rows[attribute(spans, launch_times(trace, rows)) >= 0], len(spans)

    eager = load_trace(CAPTURE / "eager_bs1.json.gz")
    graphed = RunAnalysis(FIXTURES / "llm_h200" / "runs" / "pytorch_fp16_bs1_cg_bs1").trace
    found = graphs.agreement(decode(eager), decode(graphed))
    assert (found.eager_steps, found.graph_steps) == (8, 64)
    assert found.agreeing_share > 0.999
    ops = found.operators.set_index("operator")
    for op in ("aten::mm", "aten::mul", "aten::copy_", "aten::_cudnn_attention_forward"):
        assert ops.loc[op, "ratio"] == pytest.approx(1.0, abs=0.03), op
    heavy = ops[ops["eager_us_per_step"] > 30]  # the few-µs ops spread more between runs
    assert len(heavy) >= 8 and heavy["ratio"].between(0.9, 1.15).all()
    total = ops["graph_us_per_step"].sum() / ops["eager_us_per_step"].sum()
    assert total == pytest.approx(1.0, abs=0.05)
