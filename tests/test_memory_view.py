"""Memory over time (profiler.trace.memory, `summarize --view memory`): the figures equal the
TensorBoard plugin's Memory view (torch-tb-profiler 0.4.3, its loader driven in-process) on real
traces recorded with run --profile-memory: three H200 GPU runs and one CPU run (the llama 1B
trace of memory_h200 holds too, checked by scripts/plugin_memory.py: its plugin load is slow)."""

from __future__ import annotations

import gzip
import json
import logging
from pathlib import Path

import pytest

from profiler.trace.load import load_trace
from profiler.trace.memory import memory_view, read_records
from profiler.trace.memory_records import MemoryView

from .conftest import FIXTURES

MEMORY = FIXTURES / "memory_h200"
CPU = FIXTURES / "memory_cpu"
TRACES = {
    "resnet50_fp16": MEMORY / "tb_logs" / "pytorch_fp16_bs8_mem_resnet50_fp16_bs8",
    "resnet18_fp32": MEMORY / "tb_logs" / "pytorch_fp32_bs4_mem_resnet18_fp32_bs4",
    "llama_tiny_generate": MEMORY / "tb_logs" / "pytorch_fp16_bs2_mem_llama_tiny_gen",
    "resnet18_cpu": CPU / "tb_logs" / "pytorch_fp32_bs2_mem_resnet18_cpu",
}


def _trace(folder: Path) -> Path:
    return next(folder.glob("*.pt.trace.json.gz"))


def _plugin(path: Path):
    """The plugin's profile and run of ``path`` (as its loader makes them)."""
    pytest.importorskip("torch_tb_profiler")
    from torch_tb_profiler.profiler.data import RunProfileData
    from torch_tb_profiler.profiler.run_generator import RunGenerator

    logging.disable(logging.WARNING)
    try:
        profile = RunProfileData.from_json(
            "worker", 0, json.loads(gzip.decompress(path.read_bytes()))
        )
        run = RunGenerator("worker", 0, profile).generate_run_profile()
    finally:
        logging.disable(logging.NOTSET)
    return profile, run


@pytest.fixture(scope="module", params=sorted(TRACES))
def both(request) -> tuple[MemoryView, object, object]:
    path = _trace(TRACES[request.param])
    view = memory_view(load_trace(path))
    assert view is not None
    return (view, *_plugin(path))


def test_curve_points_equal_the_plugins(both):
    """Every point of every device's curve: the plugin's time (ms since its first_ts) to the
    bit, its allocated and reserved bytes (asked in bytes, not its default KiB; no step-plot
    points, and under its 10,240-point downsampling)."""
    view, _, run = both
    curve = run.get_memory_curve(time_metric="ms", memory_metric="B", patch_for_step_plot=False)
    assert curve["metadata"]["first_ts"] == view.first_ts_us
    assert sorted(curve["rows"]) == sorted(view.devices)
    for mine in view.curves:
        theirs = curve["rows"][mine.device]
        assert len(theirs) < 10240  # (the plugin downsamples longer curves)
        points = [list(p) for p in zip(mine.time_ms, mine.allocated_bytes, mine.reserved_bytes)]
        assert points == theirs


def test_peaks_and_their_operator_equal_the_plugins(both):
    """Each device's peak (the plugin's "Peak Memory Usage"), and the operator (and parent) the
    plugin attributes the first event that reached it to."""
    view, profile, run = both
    curve = run.get_memory_curve(time_metric="ms", memory_metric="B", patch_for_step_plot=False)
    records = [r for r in profile.memory_snapshot.memory_records if r.addr is not None]
    for peak in view.peaks:
        assert curve["metadata"]["peaks"][peak.device] == (
            f"Peak Memory Usage: {float(peak.allocated_bytes):.1f}B"
        )
        mine = [r for r in records if r.device_name == peak.device]
        first = next(r for r in mine if r.total_allocated == peak.allocated_bytes)
        assert first.bytes > 0 and peak.operator == first.op_name
        assert peak.parent == first.parent_op_name
        assert peak.reserved_bytes == max(r.total_reserved for r in mine)
    assert view.attributed_events == sum(
        len(v) for v in profile.memory_snapshot.op_memory_table.values()
    )


def test_operator_table_equals_the_plugins(both):
    """The Memory view's table, per device and operator: the plugin's own statistics (bytes
    and counts, before its display rounding to 0.01 KB), row for row."""
    view, profile, _ = both
    stats = profile.memory_snapshot.get_memory_statistics(profile.tid2tree)
    theirs = {(d, name): list(v) for d, ops in stats.items() for name, v in ops.items()}
    mine = {
        (r.device, r.operator): [
            r.self_size_increase_bytes,
            r.self_allocation_size_bytes,
            r.self_allocation_count,
            r.size_increase_bytes,
            r.allocation_size_bytes,
            r.allocation_count,
            r.calls,
        ]
        for r in view.operators
    }
    assert mine == theirs
    assert len(mine) >= 15
    # every call, beside the plugin's Calls: its Operator view's calls of the name
    operator_view = {agg.name: agg.calls for agg in profile.op_list_groupby_name}
    assert {r.operator: r.calls_in_trace for r in view.operators} == {
        r.operator: operator_view[r.operator] for r in view.operators
    }


def test_a_trace_without_memory_events_has_no_view():
    path = _trace(FIXTURES / "h200" / "tb_logs" / "pytorch_fp16_bs8")
    assert not len(read_records(path))
    assert memory_view(load_trace(path)) is None


def test_records_read_the_same_from_a_plain_file(tmp_path):
    """The pass over a gzip file and over its plain text (mapped, cut in pieces) agree."""
    path = _trace(TRACES["resnet18_fp32"])
    plain = tmp_path / "trace.json"
    plain.write_bytes(gzip.decompress(path.read_bytes()))
    assert read_records(plain) == read_records(path)
    assert len(read_records(path)) == 176


# ---- summarize --view memory -------------------------------------------------------------------

RUN = MEMORY / "runs" / "pytorch_fp16_bs8_mem_resnet50_fp16_bs8"


def test_summarize_memory_json_is_its_typed_document(cli):
    from .test_cli_output import json_of, validate

    data = validate(
        "summarize-memory", json_of(cli("summarize", str(RUN), "--view", "memory", "--json"))
    )
    assert data["devices"] == ["GPU0"]
    (peak,) = data["peaks"]
    assert peak["allocated_bytes"] == 137022464 and peak["operator"] == "aten::empty"
    assert peak["parent"] == "aten::native_batch_norm"
    assert len(data["curves"][0]["time_ms"]) == data["events"] == 884
    row = next(r for r in data["operators"] if r["operator"] == "aten::cudnn_convolution")
    assert row["self_allocation_count"] == 116 and row["calls"] == 106


def test_summarize_memory_prints_the_peak_and_the_table(cli):
    done = cli("summarize", str(RUN), "--view", "memory", "--top", "3")
    assert done.code == 0, done.stderr
    out = " ".join(done.stdout.split())
    assert (
        "GPU0: peak 130.7 MiB allocated at 2.763 ms by aten::empty (in aten::native_batch_norm)"
        in out
    )
    assert "memory by operator, by allocation size (top 3 of 16)" in out
    assert "666 of 884 [memory] events attributed to an operator" in out


def test_a_trace_without_memory_events_is_refused_in_one_line(cli):
    done = cli(
        "summarize", str(FIXTURES / "h200" / "runs" / "pytorch_fp16_bs8"), "--view", "memory"
    )
    assert done.code != 0
    (line,) = done.stderr.strip().splitlines()
    assert "holds no [memory] events: the run was not recorded with --profile-memory" in line
    assert "Traceback" not in done.stderr


def test_summarize_memory_walks_its_row(cli, monkeypatch):
    from profiler.report import sections

    walked = []
    real = sections.print_sections

    def spy(rows, ctx):
        walked.append(tuple(rows))
        return real(rows, ctx)

    monkeypatch.setattr(sections, "print_sections", spy)
    assert cli("summarize", str(RUN), "--view", "memory").code == 0
    assert walked == [sections.summarize_rows("memory")] == [(sections.MEMORY,)]


def test_the_run_page_shows_the_chart_and_each_devices_table(tmp_path):
    from profiler.commands.report import run

    page = tmp_path / "page.html"
    text = run(str(CPU / "runs" / "pytorch_fp32_bs2_mem_resnet18_cpu"), None, page).read_text()
    chart = text.index("memory over time</h2>")
    assert text.index("data:image/png;base64", chart) < text.index("CPU memory by operator</h2>")
    assert "by aten::mkldnn_convolution (in aten::_convolution)" in text
    assert "Self Allocation Size (KiB)" in text


def test_plot_draws_the_memory_chart_beside_the_categories(cli, tmp_path):
    cpu = cli(
        "plot", str(CPU / "runs" / "pytorch_fp32_bs2_mem_resnet18_cpu"), "--out", str(tmp_path)
    )
    assert cpu.code == 0, cpu.stderr  # a CPU run: no kernels to plot, its memory still
    gpu = cli("plot", str(RUN), "--out", str(tmp_path))
    assert gpu.code == 0, gpu.stderr
    assert sorted(p.name for p in tmp_path.glob("*.png")) == [
        "pytorch_fp16_bs8_mem_resnet50_fp16_bs8_categories.png",
        "pytorch_fp16_bs8_mem_resnet50_fp16_bs8_memory.png",
        "pytorch_fp32_bs2_mem_resnet18_cpu_memory.png",
    ]


def test_summary_md_has_the_memory_section(cli, tmp_path):
    done = cli("summarize", str(RUN), "--out", str(tmp_path / "out"))
    assert done.code == 0, done.stderr
    md = (tmp_path / "out" / "summary.md").read_text()
    section = md[md.index("## Memory ([memory] events, run --profile-memory)") :]
    assert "- GPU0: peak 130.7 MiB allocated at 2.763 ms by aten::empty" in section
    assert "| aten::cudnn_convolution | 106 | 363,440.00 | 363,440.00 | 116 | 116 |" in section


def test_a_file_the_fast_pass_refuses_is_read_whole(tmp_path):
    """An event without 'ph' sends the pass to the whole file's decode, where a [memory] event
    of odd values is left out instead of stopping the view."""
    path = _trace(TRACES["resnet18_fp32"])
    data = json.loads(gzip.decompress(path.read_bytes()))
    data["traceEvents"] += [
        {"name": "no phase"},
        {"ph": "i", "name": "[memory]", "tid": 1, "ts": "soon", "args": {"Bytes": "many"}},
    ]
    odd = tmp_path / "odd.json"
    odd.write_text(json.dumps(data))
    assert read_records(odd) == read_records(path)


def test_each_profiled_steps_peak_is_the_curves_largest_in_it(both):
    view, profile, _ = both
    assert [s.name for s in view.steps] == [f"ProfilerStep#{n}" for n in profile.steps_names]
    for curve in view.curves:
        per_step = []
        for step in view.steps:
            inside = [
                b
                for t, b in zip(curve.time_ms, curve.allocated_bytes)
                if step.start_ms <= t < step.end_ms
            ]
            assert step.peak_allocated_bytes.get(curve.device) == (max(inside) if inside else None)
            per_step += inside
        peak = next(p for p in view.peaks if p.device == curve.device)
        assert max(per_step) == peak.allocated_bytes  # the peak falls in a profiled step


def test_a_nan_literal_reads_as_the_loader_reads_it_and_a_cut_file_is_refused(tmp_path):
    """Python's json takes the NaN literal that msgspec refuses (a trace the loader reads in
    full); a file cut short is one line naming it, not a traceback."""
    path = _trace(TRACES["resnet18_fp32"])
    text = gzip.decompress(path.read_bytes()).decode()
    nan = tmp_path / "nan.json"
    nan.write_text(text.replace('"traceEvents": [', '"traceEvents": [{"ph": "X", "ts": NaN},', 1))
    assert read_records(nan) == read_records(path)
    cut = tmp_path / "cut.json"
    cut.write_text(text[: len(text) // 2])
    from profiler.errors import UserError

    with pytest.raises(UserError, match="its \\[memory\\] events cannot be read"):
        read_records(cut)


def test_summarize_memory_out_writes_its_tables(cli, tmp_path):
    import pandas as pd

    done = cli("summarize", str(RUN), "--view", "memory", "--out", str(tmp_path / "out"))
    assert done.code == 0, done.stderr
    ops = pd.read_csv(tmp_path / "out" / "memory_operators.csv")
    conv = ops[ops["Operator"] == "aten::cudnn_convolution"].iloc[0]
    assert (conv["Calls"], conv["Self Allocation Count"], conv["Calls in trace"]) == (106, 116, 106)
    assert len(pd.read_csv(tmp_path / "out" / "memory_curve.csv")) == 884
    steps = pd.read_csv(tmp_path / "out" / "memory_steps.csv")
    assert list(steps["step"]) == ["ProfilerStep#2", "ProfilerStep#3"]
    assert list(steps["peak_allocated_bytes"]) == [137022464, 137022464]
