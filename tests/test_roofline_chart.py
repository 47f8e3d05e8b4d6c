"""Issue 22, point 7: what the roofline chart draws (data and labels, not pixels): one roof per
precision present, each run against its own roof and marked by backend, no folders in the title;
and one clear line when there is no roofline (a bare trace with --flops)."""

import json

import pytest

from profiler.report.sentences import roof_label, roof_name, roofline_title

from .conftest import FIXTURES

H200 = FIXTURES / "h200"
FLOPS = json.loads((FIXTURES / "roofline" / "resnet50_roofline_inputs.json").read_text())
RUNS = ("pytorch_fp16_bs8", "pytorch_fp32_bs8", "ttrt_fp16_bs8", "ttrt_fp32_bs8")


def _roofline(run: str, peaks: dict | None = None, where: str = ""):
    from profiler.analysis.insight import with_flops
    from profiler.analysis.roofline import ceilings_for, result_roofline
    from profiler.runs.result import read_result

    result = with_flops(read_result(H200 / "runs" / run / "result.json"), FLOPS)
    return result_roofline(result, ceilings_for(result, peaks, where))


@pytest.fixture(scope="module")
def points():
    return [(run, _roofline(run)) for run in RUNS]


def test_one_roof_per_precision_and_each_point_against_its_own(points):
    from profiler.analysis.roofline import chart_data

    chart = chart_data(points)
    # eager FP32 meets the FP32 ceiling (TF32 off), TensorRT FP32 the TF32 one (it may pick TF32)
    assert [r.key for r in chart.roofs] == ["fp16", "fp32", "tf32"]
    roofs = {r.key: r for r in chart.roofs}
    assert roofs["fp16"].peak_tflops == 989.4 and roofs["fp32"].peak_tflops == 67.0
    assert roofs["tf32"].peak_tflops == 494.7
    assert {r.peak_gbs for r in chart.roofs} == {4800.0}
    drawn = {p.label: p for p in chart.points}
    assert {label: p.roof.key for label, p in drawn.items()} == {
        "pytorch_fp16_bs8": "fp16",
        "pytorch_fp32_bs8": "fp32",
        "ttrt_fp16_bs8": "fp16",
        "ttrt_fp32_bs8": "tf32",
    }
    # every point sits under its own roof (an FP16 point above the FP32 roof is no error)
    for p in chart.points:
        assert p.achieved_tflops <= p.roof.at(p.intensity) and p.roof is roofs[p.roof.key]
    assert chart.backends == ["pytorch_fp16", "pytorch_fp32", "ttrt_fp16", "ttrt_fp32"]
    assert [p.backend for p in chart.points] == chart.backends


def test_the_figure_draws_every_roof_and_marks_backends(points):
    pytest.importorskip("matplotlib")
    from profiler.report.plots import roofline_figure

    fig = roofline_figure(points)
    ax = fig.axes[0]
    lines = [line.get_label() for line in ax.get_lines()]
    assert lines == [
        "fp16 roof: 4,800 GB/s, 989 TFLOP/s",
        "fp32 roof: 4,800 GB/s, 67 TFLOP/s",
        "tf32 roof: 4,800 GB/s, 495 TFLOP/s",
    ]
    scatter = [c for c in ax.collections]
    assert [c.get_label() for c in scatter] == [
        "pytorch_fp16_bs8 (pytorch_fp16, fp16)",
        "pytorch_fp32_bs8 (pytorch_fp32, fp32)",
        "ttrt_fp16_bs8 (ttrt_fp16, fp16)",
        "ttrt_fp32_bs8 (ttrt_fp32, tf32)",
    ]
    # one marker shape per backend, the colour of the point's roof
    paths = [c.get_paths()[0].vertices.tobytes() for c in scatter]
    assert len(set(paths)) == 4
    colour = {line.get_label().split()[0]: line.get_color() for line in ax.get_lines()}
    from matplotlib.colors import to_hex

    assert to_hex(scatter[0].get_facecolor()[0]) == to_hex(colour["fp16"])
    assert to_hex(scatter[3].get_facecolor()[0]) == to_hex(colour["tf32"])
    assert "/" not in ax.get_title()
    import matplotlib.pyplot as plt

    plt.close(fig)


def test_no_absolute_path_in_the_title():
    from profiler.analysis.roofline import chart_data

    peaks = {
        "machine": {"device": "NVIDIA H200"},
        "copy": {"gb_per_s": 4000.0},
        "matmul_tflops": {
            "fp32": 50.0,
            "tf32": 400.0,
            "fp16": 700.0,
            "bf16": 700.0,
            "fp8": None,
            "int8": None,
        },
    }
    where = "/home/someone/.cache/infer-profiler/peaks/NVIDIA_H200.json"
    chart = chart_data([("a", _roofline("pytorch_fp16_bs8", peaks, where))])
    assert chart.sources[0].startswith("measured (NVIDIA_H200.json): fp16 with torch.mm")
    title = roofline_title(chart)
    assert "/home" not in title and "measured (NVIDIA_H200.json)" in title
    assert chart.roofs[0].peak_gbs == 4000.0


def test_same_precision_on_two_gpus_gets_two_roofs():
    from profiler.analysis.roofline import chart_data

    peaks = {
        "machine": {"device": "NVIDIA H200"},
        "copy": {"gb_per_s": 4000.0},
        "matmul_tflops": {
            "fp32": 50.0,
            "tf32": 400.0,
            "fp16": 700.0,
            "bf16": 700.0,
            "fp8": None,
            "int8": None,
        },
    }
    chart = chart_data(
        [
            ("datasheet", _roofline("pytorch_fp16_bs8")),
            ("measured", _roofline("pytorch_fp16_bs8", peaks, "p.json")),
        ]
    )
    assert [(r.key, r.peak_gbs, r.apart) for r in chart.roofs] == [
        ("fp16", 4800.0, False),
        ("fp16", 4000.0, True),
    ]
    assert [p.roof for p in chart.points] == chart.roofs
    assert [roof_name(r) for r in chart.roofs] == ["fp16", "fp16, 4,000 GB/s"]
    assert roof_label(chart.roofs[1]) == "fp16, 4,000 GB/s roof: 4,000 GB/s, 700 TFLOP/s"


def test_the_html_chart_is_the_same_figure(points, monkeypatch):
    pytest.importorskip("matplotlib")
    from profiler.report import html, plots

    seen = []
    real = plots.roofline_figure
    monkeypatch.setattr(plots, "roofline_figure", lambda p: seen.append(real(p)) or seen[-1])
    assert html.roofline_chart(points).startswith("<img")
    assert len(seen[0].axes[0].get_lines()) == 3


def test_no_roofline_says_why_in_one_line():
    from profiler.analysis.roofline import NO_ROOFLINE_INPUTS, no_roofline_reason

    bare = no_roofline_reason(None, FLOPS)
    assert bare.startswith("no roofline: a bare trace has no timed latency")
    assert "--flops applies to run folders" in bare and "\n" not in bare
    assert "roofline_inputs" not in bare
    from profiler.runs.result import read_result

    raw = read_result(H200 / "runs" / "pytorch_fp16_bs8" / "result.json")
    assert no_roofline_reason(raw) == NO_ROOFLINE_INPUTS
    other = {**FLOPS, "model": "bert"}
    assert no_roofline_reason(raw, other) == (
        "no roofline: the --flops table (model bert) has no row fp16_bs8 for model resnet50"
    )


def test_report_of_a_bare_trace_with_flops_says_so(tmp_path, cli):
    pytest.importorskip("matplotlib")
    trace = next((H200 / "tb_logs" / "pytorch_fp16_bs8").glob("*.pt.trace.json.gz"))
    flops = FIXTURES / "roofline" / "resnet50_roofline_inputs.json"
    out = tmp_path / "r.html"
    result = cli("report", str(trace), "--flops", str(flops), "--out", str(out))
    assert result.code == 0, result
    page = out.read_text()
    assert "no roofline: a bare trace has no timed latency" in page
    assert "has no roofline_inputs" not in page
