"""compare on the real H200 runs: the diff's views add up and agree with summarize."""

import subprocess
import sys

import pandas as pd
import pytest

from .conftest import FIXTURES, ROOT

H200 = FIXTURES / "h200"


@pytest.fixture(scope="module")
def summaries():
    from profiler.runs.command_targets import resolve_target
    from profiler.trace.summary import summarize

    names = [
        "pytorch_fp32_bs8",
        "pytorch_fp16_bs8",
        "ttrt_fp16_bs8",
        "inductor_fp16_bs8",
        "inductor_fp16_bs8_maxautotune",
    ]
    return {n: summarize(resolve_target(str(H200 / "runs" / n)).path) for n in names}


PAIRS = [
    ("pytorch_fp16_bs8", "ttrt_fp16_bs8"),
    ("pytorch_fp32_bs8", "pytorch_fp16_bs8"),
    ("inductor_fp16_bs8", "inductor_fp16_bs8_maxautotune"),
]


@pytest.mark.parametrize("a, b", PAIRS)
def test_every_view_adds_up(summaries, a, b):
    from profiler.trace.diff import BOTH, ONLY_A, ONLY_B, diff, steps_of

    sa, sb = summaries[a], summaries[b]
    d = diff(sa, sb, a, b)
    total_a = sa.kernels.total_kernel_us / steps_of(sa)
    total_b = sb.kernels.total_kernel_us / steps_of(sb)
    for view in (d.kernels, d.categories, d.operators):
        assert view["us_a"].sum() == pytest.approx(total_a)
        assert view["us_b"].sum() == pytest.approx(total_b)
        assert view["delta_us"].sum() == pytest.approx(total_b - total_a)
    # matched + unmatched cover every kernel of each side, each exactly once
    k = d.kernels
    assert set(k.loc[k["side"].isin([BOTH, ONLY_A]), "name"]) == set(sa.kernels.table["name"])
    assert set(k.loc[k["side"].isin([BOTH, ONLY_B]), "name"]) == set(sb.kernels.table["name"])
    assert k["name"].is_unique
    # Tensor Core shares are what summarize reports for each side
    tc = d.overview.set_index("metric").loc["time in Tensor Core kernels"]
    assert tc["a"] == pytest.approx(100 * sa.kernels.tensor_core_share)
    assert tc["b"] == pytest.approx(100 * sb.kernels.tensor_core_share)
    util = d.overview.set_index("metric").loc["GPU utilization"]
    assert util["a"] == pytest.approx(sa.overview.devices[0].gpu_utilization_pct)
    faster, slower = d.top_changes(5)
    assert (faster["delta_us"] < 0).all() and (slower["delta_us"] > 0).all()
    assert faster["delta_us"].is_monotonic_increasing
    assert slower["delta_us"].is_monotonic_decreasing


def test_eager_vs_tensorrt_share_no_kernel_so_operators_decide(summaries):
    from profiler.trace.diff import diff

    d = diff(summaries["pytorch_fp16_bs8"], summaries["ttrt_fp16_bs8"])
    assert d.shared_kernels == 0 and d.change_level == "operator"
    assert any("share no kernel name" in n for n in d.notes)
    ops = d.operators.set_index("operator")
    # every TensorRT kernel is attributed to the engine's operator
    assert ops.loc["tensorrt::execute_engine", "side"] == "only B"
    assert ops.loc["tensorrt::execute_engine", "us_b"] > 0.99 * d.kernels["us_b"].sum() - 5
    _, slower = d.top_changes(3)
    assert slower.iloc[0]["operator"] == "tensorrt::execute_engine"


def test_inductor_variants_match_some_kernels(summaries):
    from profiler.trace.diff import diff

    d = diff(summaries["inductor_fp16_bs8"], summaries["inductor_fp16_bs8_maxautotune"])
    assert d.shared_kernels > 0 and d.change_level == "kernel"
    both = d.kernels[d.kernels["side"] == "both"]
    assert (both["us_a"] > 0).all() and (both["us_b"] > 0).all()


def test_compare_command_tables_and_csvs(tmp_path, cli, monkeypatch):
    # in the test's process: what compare prints needs no fresh one (the one-line error below has)
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.chdir(H200)
    done = cli(
        "compare",
        "pytorch_fp16_bs8",
        "runs/ttrt_fp16_bs8",
        "--top",
        "5",
        "--out",
        str(tmp_path),
        "--view",
        "diff",
    )
    assert done.code == 0, done.stderr
    for words in (
        "Overview",
        "timed p50 latency (result.json)",
        "Kernel time by category",
        "Kernels only in A: 23 kernels",
        "tensorrt::execute_engine",
        "share no kernel name",
    ):
        assert words in done.stdout, words
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "categories.csv",
        "cpu_operators.csv",
        "kernels.csv",
        "operators.csv",
        "overview.csv",
        "top_changes.csv",
    ]
    kernels = pd.read_csv(tmp_path / "kernels.csv")
    assert set(kernels["side"]) == {"only A", "only B"} and len(kernels) == 23 + 27


def test_compare_missing_target_is_one_line(cli):
    done = cli("compare", "nope_bs8", str(H200 / "runs" / "ttrt_fp16_bs8"))  # from tmp_path
    assert done.code == 2
    assert done.stderr.strip().splitlines() == [
        "error: no such file, folder or run: nope_bs8 (looked in runs/ and tb_logs/ too)"
    ]


def test_plot_of_a_fixture_run(tmp_path, cli, monkeypatch):
    monkeypatch.chdir(H200)
    done = cli("plot", "ttrt_fp16_bs8", "--out", str(tmp_path))
    assert done.code == 0, done.stderr
    data = (tmp_path / "ttrt_fp16_bs8_categories.png").read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000


def test_plot_without_matplotlib_names_the_extra(tmp_path):
    code = (
        "import sys; sys.modules['matplotlib'] = None\n"
        "from profiler.cli.app import main\n"
        f"sys.exit(main(['plot', {str(H200 / 'runs' / 'ttrt_fp16_bs8')!r}]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        'error: plots need matplotlib: pip install -e ".[plots]"'
    ]


def test_plots_of_a_gpu_sweep_built_from_the_fixtures(tmp_path, monkeypatch):
    """The H200 runs laid out as a one-batch-size sweep: all four figures, categories included."""
    import json
    import shutil

    from profiler.analysis.sweep_analysis import cell_metrics
    from profiler.commands.plot import plot

    monkeypatch.chdir(tmp_path)
    backends = ["pytorch_fp32", "pytorch_fp16", "inductor_fp16", "ttrt_fp16"]
    cells = {}
    for backend in backends:
        name = f"{backend}_bs8"
        shutil.copytree(H200 / "runs" / name, tmp_path / "runs" / "gpu" / name)
        shutil.copytree(H200 / "tb_logs" / name, tmp_path / "tb_logs" / "gpu" / name)
        result_path = tmp_path / "runs" / "gpu" / name / "result.json"
        result = json.loads(result_path.read_text())
        result["trace"]["files"] = [
            f.replace("tb_logs/", "tb_logs/gpu/") for f in result["trace"]["files"]
        ]
        result_path.write_text(json.dumps(result))
        cells[name] = {
            "backend": backend,
            "batch_size": 8,
            "status": "ok",
            "metrics": cell_metrics(tmp_path / "runs" / "gpu" / name),
        }
    assert cells["ttrt_fp16_bs8"]["metrics"]["tensor_core_pct"] > 90
    (tmp_path / "runs" / "gpu" / "sweep.json").write_text(
        json.dumps(
            {
                "name": "gpu",
                "model": "resnet50",
                "backends": backends,
                "batch_sizes": [8],
                "baseline": "pytorch_fp32",
                "options": {"model": "resnet50"},
                "cells": cells,
            }
        )
    )
    written = plot("gpu", None)
    assert sorted(p.name for p in written) == [
        "categories.png",
        "latency.png",
        "speedup.png",
        "throughput.png",
    ]
    for path in written:
        assert path.parent.resolve() == tmp_path.resolve() / "runs" / "gpu" / "plots"
        assert path.read_bytes()[:4] == b"\x89PNG" and path.stat().st_size > 10_000
