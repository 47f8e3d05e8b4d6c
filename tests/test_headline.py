"""Timed headline in summarize and compare, what differs between runs, machine output."""

import json

import pandas as pd
import pytest

from tests.conftest import FIXTURES

RUNS = FIXTURES / "h200" / "runs"


def test_summarize_opens_with_the_timed_figures_and_labels_the_profiled_step(cli):
    out = cli("summarize", str(RUNS / "pytorch_fp16_bs8"), "--view", "overview")
    assert out.code == 0, out.stderr
    first = out.stdout.index("Timed window")
    assert first < out.stdout.index("Overview")
    assert "5.791 ms" in out.stdout  # the run's timed p50, from result.json
    assert "1,493.8 samples/s" in out.stdout
    assert "step time under the profiler" in out.stdout
    # 12.327 ms under the profiler / 5.791 ms timed p50
    assert "2.13x the timed p50" in out.stdout
    assert "backend=pytorch_fp16" in out.stdout and "batch_size=8" in out.stdout
    # this window really is noisy and bimodal (CV 16.9 %): the headline says so
    assert "warning: noisy" in out.stdout and "warning: bimodal" in out.stdout


def test_summarize_json_carries_the_headline(cli):
    out = cli("summarize", str(RUNS / "ttrt_fp16_bs8"), "--json", "--top", "3")
    data = json.loads(out.stdout)
    headline = data["headline"]
    assert headline["timed"]["p50_ms"] == pytest.approx(0.7987, abs=1e-3)
    assert headline["noise"]["cv"] < 0.1 and headline["noise"]["warnings"] == []
    assert headline["memory"]["note"] == "not recorded"  # recorded before memory was
    assert headline["profiler_overhead_ratio"] > 1


def test_a_bare_trace_has_no_headline(cli):
    trace = next((FIXTURES / "h200" / "tb_logs" / "pytorch_fp32_bs8").iterdir())
    out = cli("summarize", str(trace), "--view", "overview")
    assert out.code == 0 and "Timed window" not in out.stdout


def test_compare_of_a_run_with_itself_is_undecided_and_nothing_differs(cli):
    # one process a side: the between-process spread is unknown, so even a ratio of exactly 1
    # is no evidence of sameness; the line says so and how to decide it
    run = str(RUNS / "pytorch_fp32_bs8")
    out = cli("compare", run, run, "--top", "3", "--view", "full")
    assert out.code == 0, out.stderr
    assert out.stdout.index("Timed window") < out.stdout.index("Overview")
    assert "undecided" in out.stdout and "1.00x" in out.stdout
    assert "over 1 vs 1 process, within one window a side (one process on a side" in out.stdout
    assert "latency undecided:" in out.stdout and "--processes" in out.stdout
    assert "no field differs" in out.stdout


def test_compare_json_has_speedup_verdict_and_every_differing_field(cli):
    out = cli("compare", str(RUNS / "pytorch_fp32_bs8"), str(RUNS / "ttrt_fp16_bs8"), "--json")
    data = json.loads(out.stdout)
    timed = data["timed"]
    assert timed["speedup_x"] == pytest.approx(4.888 / 0.7987, rel=1e-3)
    assert timed["verdict"]["verdict"] == "faster"  # 6x: far beyond a 10 % floor
    fields = {d["field"] for d in timed["differences"]}
    assert {
        "config.backend",
        "backend.precision",
        "environment.packages.torch-tensorrt-rtx",
    } <= fields
    assert "config.batch_size" not in fields
    # full kernel names in JSON
    assert all("name" in row for row in data["kernels"])


def test_compare_csvs_write_counts_as_integers(cli, tmp_path):
    out = cli(
        "compare",
        str(RUNS / "pytorch_fp32_bs8"),
        str(RUNS / "pytorch_fp16_bs8"),
        "--out",
        str(tmp_path / "diff"),
    )
    assert out.code == 0
    kernels = (tmp_path / "diff" / "kernels.csv").read_text().splitlines()
    header = kernels[0].split(",")
    for line in kernels[1:6]:
        cells = line.split(",")
        assert "." not in cells[header.index("calls_a")]
    operators = pd.read_csv(tmp_path / "diff" / "operators.csv")
    assert pd.api.types.is_integer_dtype(operators["kernels_a"])


def test_compare_out_parquet_keeps_full_names(cli, tmp_path):
    pytest.importorskip("pyarrow")
    path = tmp_path / "kernels.parquet"
    out = cli(
        "compare",
        str(RUNS / "pytorch_fp32_bs8"),
        str(RUNS / "pytorch_fp16_bs8"),
        "--out",
        str(path),
    )
    assert out.code == 0
    frame = pd.read_parquet(path)
    assert {"name", "kernel", "calls_a"} <= set(frame.columns)
    assert str(frame["calls_a"].dtype) == "Int64"


def test_differing_fields_lists_changed_and_missing_fields():
    from profiler.analysis.figures import differing_fields

    a = {"config": {"iters": 100, "tf32": False}, "environment": {"gpu": {"name": "H100"}}}
    b = {
        "config": {"iters": 50, "tf32": False, "min_time": 1.0},
        "environment": {"gpu": {"name": "H200"}},
    }
    assert differing_fields(a, b) == [
        ("config.iters", 100, 50),
        ("config.min_time", None, 1.0),
        ("environment.gpu.name", "H100", "H200"),
    ]


def fixture_result(run: str, **changes):
    """A committed run's RunResult, with fields replaced (msgspec.structs.replace)."""
    import msgspec

    from profiler.runs.result import read_result

    return msgspec.structs.replace(read_result(RUNS / run / "result.json"), **changes)


def test_memory_on_a_cpu_run_says_not_applicable():
    from profiler.analysis.figures import NOT_ON_CPU
    from profiler.analysis.headline import MemoryFigures, memory_figures
    from profiler.runs.result import Memory

    cpu = fixture_result("pytorch_fp32_bs8", device="cpu", memory=Memory())
    assert memory_figures(cpu).note == NOT_ON_CPU
    gpu = fixture_result(
        "pytorch_fp32_bs8",
        memory=Memory(
            peak_allocated_bytes=3 * 1024**2,
            peak_reserved_bytes=4 * 1024**2,
            engine_device_memory_bytes=1024**2,
        ),
    )
    assert memory_figures(gpu) == MemoryFigures(
        peak_allocated_mib=3.0, peak_reserved_mib=4.0, engine_mib=1.0, note=None
    )
    # the committed runs predate memory: "not recorded", not zero
    assert memory_figures(fixture_result("pytorch_fp32_bs8")).note == "not recorded"


def test_memory_and_noise_survive_result_json(tmp_path):
    from profiler.runs.result import Memory, NoiseStats, RepeatSpread, read_result, write_result

    spread = RepeatSpread(
        runs=2,
        p50_ms=[1.0, 1.1],
        median_p50_ms=1.05,
        min_p50_ms=1.0,
        max_p50_ms=1.1,
        range_pct_of_median=9.5,
    )
    original = read_result(RUNS / "pytorch_fp32_bs8" / "result.json")
    import msgspec

    timing = msgspec.structs.replace(
        original.timing,
        iterations_chosen_by="--min-time 2 s",
        min_time_s=2.0,
        noise=NoiseStats(
            n=100,
            median_ms=1.0,
            cv=0.01,
            iqr_ms=0.01,
            relative_iqr=0.01,
            warnings=["noisy: x"],
            repeat_runs=spread,
        ),
    )
    result = msgspec.structs.replace(
        original, timing=timing, memory=Memory(peak_allocated_bytes=5, scope="timed")
    )
    written = write_result(tmp_path, result)
    data = json.loads(written.read_text())
    assert data["timing"]["noise"]["repeat_runs"]["runs"] == 2
    assert data["memory"]["peak_allocated_bytes"] == 5
    assert read_result(written) == result


def test_run_table_shows_noise_memory_and_next_steps(capsys):
    from profiler.report.run_view import print_result
    from profiler.runs.result import Memory

    result = fixture_result(
        "ttrt_fp16_bs8",
        latency_csv=str(RUNS / "ttrt_fp16_bs8" / "latency.csv"),
        memory=Memory(
            peak_allocated_bytes=200 * 1024**2,
            peak_reserved_bytes=256 * 1024**2,
            engine_device_memory_bytes=12 * 1024**2,
        ),
    )
    print_result(result)
    text = capsys.readouterr().out
    assert "200.0" in text and "256.0" in text and "12.0" in text  # MiB: in the headers
    assert "2.4 %" in text  # CV computed from latency.csv for a run that predates it
    assert "next: python profile.py summarize" in text and "--view layers" in text


def test_summarize_out_parquet_writes_the_kernel_table(cli, tmp_path):
    pytest.importorskip("pyarrow")
    path = tmp_path / "kernels.parquet"
    out = cli("summarize", str(RUNS / "pytorch_fp32_bs8"), "--out", str(path))
    assert out.code == 0, out.stderr
    frame = pd.read_parquet(path)
    assert frame["name"].is_unique and pd.api.types.is_integer_dtype(frame["calls"])


def test_engine_memory_note_is_typed_and_written_back_under_backend_notes():
    from profiler.runs.result import EngineMemory, result_from_dict, result_to_dict

    data = json.loads((RUNS / "ttrt_fp16_bs8" / "result.json").read_text())
    data["backend"]["notes"]["engine_memory"] = {
        "engine_device_memory_bytes": 2048,
        "per_engine_bytes": [2048],
        "why_not": None,
    }
    result = result_from_dict(data)
    assert result.backend.engine_memory == EngineMemory(2048, [2048], None)
    assert "engine_memory" not in result.backend.extra
    notes = result_to_dict(result)["backend"]["notes"]
    assert notes["engine_memory"]["engine_device_memory_bytes"] == 2048
