"""A real TensorBoard with the PyTorch profiler plugin over H200 traces made by this harness.

The server is started by the same helper as `profile.py tensorboard`, on a free loopback port,
and stopped by its PID whatever happens. It serves the raw traces and their tb-compat copies
side by side, so each assertion compares what the plugin makes of both.
"""

import shutil

import pytest

from profiler.runs.layout import COMPAT_SUFFIX, compat_dir_for
from profiler.tools import tensorboard as tb
from profiler.trace.tb_compat import write_compat_copy

from .conftest import FIXTURES

H200_TB = FIXTURES / "h200" / "tb_logs"
RUNS = ("pytorch_fp16_bs8", "pytorch_fp32_bs8", "ttrt_fp16_bs8")
WORKER = "resnet50"  # tensorboard_trace_handler's worker name: the harness uses the model name


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    pytest.importorskip("torch_tb_profiler")
    logdir = tmp_path_factory.mktemp("tb_logs")
    for run in RUNS:
        shutil.copytree(H200_TB / run, logdir / run)
        for trace in (logdir / run).iterdir():
            write_compat_copy(trace, compat_dir_for(trace))
    log_path = logdir.parent / "tensorboard.log"
    with open(log_path, "w") as log:
        started = tb.start(logdir, output=log)
        try:
            tb.wait_until_serving(started, timeout=60)
            names = set(RUNS) | {r + COMPAT_SUFFIX for r in RUNS}
            tb.wait_for_runs(started, names, timeout=90)
            yield started
        finally:
            tb.stop(started)
    assert started.process.poll() is not None
    print(log_path.read_text()[-2000:])


def _q(server, route, **params):
    from urllib.parse import urlencode

    return server.get_json(f"{route}?{urlencode(params)}")


def _profile(server, run):
    assert _q(server, "/workers", run=run, view="Overview") == [WORKER]
    (span,) = _q(server, "/spans", run=run, worker=WORKER)
    return {"run": run, "worker": WORKER, "span": span}


def _steps(server, run):
    """The overview's per-step rows as {column name: value}."""
    overview = _q(server, "/overview", **_profile(server, run))
    # tooltip columns have no name
    columns = [c.get("name") for c in overview["steps"]["columns"]]
    return [
        {name: value for name, value in zip(columns, row) if name}
        for row in overview["steps"]["rows"]
    ]


def test_server_lists_the_runs_on_loopback(server):
    runs = server.get_json("/runs")
    assert set(runs["runs"]) == set(RUNS) | {r + COMPAT_SUFFIX for r in RUNS}
    assert server.host == tb.LOOPBACK
    assert _q(server, "/views", run="pytorch_fp16_bs8")[:3] == ["Overview", "Operator", "Kernel"]


@pytest.mark.parametrize("run", RUNS)
def test_raw_trace_runtime_share_is_zero_and_compat_copy_fixes_it(server, run):
    raw, compat = _steps(server, run), _steps(server, run + COMPAT_SUFFIX)
    # three ProfilerStep# spans in every fixture (schedule 1/1/3): steps 2, 3, 4
    assert [s["Step"] for s in raw] == ["2", "3", "4"]
    assert [s["Step"] for s in compat] == ["2", "3", "4"]
    # the plugin drops cuda_runtime/cuda_driver events: no Runtime time at all
    assert all(s["Runtime"] == 0 for s in raw)
    assert all(s["Runtime"] > 0 for s in compat)
    # kernel time is read the same either way
    for a, b in zip(raw, compat):
        assert a["Kernel"] == pytest.approx(b["Kernel"])


def test_kernel_table_rows_and_operator_links(server):
    table = _q(
        server,
        "/kernel/table",
        group_by="Kernel",
        **_profile(server, "pytorch_fp16_bs8" + COMPAT_SUFFIX),
    )
    columns = [c["name"] for c in table["data"]["columns"]]
    rows = [dict(zip(columns, r)) for r in table["data"]["rows"]]
    assert len(rows) > 10 and all(r["Calls"] > 0 for r in rows)
    assert sum(r["Calls"] for r in rows) == 840  # every kernel of the three steps

    def time_by_operator(run):
        table = _q(server, "/kernel/table", **_profile(server, run))  # grouped by operator
        columns = [c["name"] for c in table["data"]["columns"]]
        totals = {}
        for row in table["data"]["rows"]:
            r = dict(zip(columns, row))
            totals[r["Operator"]] = totals.get(r["Operator"], 0) + r["Total Duration (us)"]
        return totals

    # every launch goes through a cuda_runtime or cuda_driver event (TensorRT: cuLaunchKernel(Ex)
    # only), which the plugin drops: the raw trace leaves all kernels unlinked
    for run in RUNS:  # raw: no kernel linked to an operator; copy: every kernel linked
        assert set(time_by_operator(run)) == {"CallTreeRoot"}, run
        assert "CallTreeRoot" not in time_by_operator(run + COMPAT_SUFFIX), run
    compat = time_by_operator("ttrt_fp16_bs8" + COMPAT_SUFFIX)
    assert max(compat, key=compat.get) == "tensorrt::execute_engine"
    assert time_by_operator("pytorch_fp16_bs8" + COMPAT_SUFFIX)["aten::cudnn_convolution"] > 0


def test_diff_of_two_runs_has_both_sides(server):
    base = _profile(server, "pytorch_fp32_bs8" + COMPAT_SUFFIX)
    exp = _profile(server, "pytorch_fp16_bs8" + COMPAT_SUFFIX)
    node = _q(
        server,
        "/diffnode",
        exp_run=exp["run"],
        exp_worker=exp["worker"],
        exp_span=exp["span"],
        path="0",
        **base,
    )
    left, right = node["left"], node["right"]
    assert left["aggs"] and right["aggs"]
    ops_left = {a["name"] for a in left["aggs"]}
    assert "aten::conv2d" in ops_left and "aten::conv2d" in {a["name"] for a in right["aggs"]}
    # FP16 channels_last ResNet50 spends less GPU time than FP32 on the same convolutions
    assert 0 < right["device_duration"] < left["device_duration"]


def test_port_in_use_is_one_clear_error(server):
    from profiler.errors import UserError

    with pytest.raises(UserError, match=f"port {server.port} on 127.0.0.1 is in use"):
        tb.start(server.logdir, port=server.port)
