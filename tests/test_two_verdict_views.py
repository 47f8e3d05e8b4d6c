"""Every view shows both verdicts, each named: latency (what a caller waits) and GPU time (the
device's work): `compare` (text, --json, HTML), the sweep's table (terminal, benchmark.md,
benchmark.csv, the report page) and `advise --try`. With fresh processes every figure of
`compare` outside the "Recorded runs" heading is the fresh processes'. Synthetic samples with
known medians; nothing is timed."""

import io
import json
import re
import shutil

import pandas as pd
import pytest
from rich.console import Console

from profiler.analysis.headline import CompareTimed, compare_timed
from profiler.analysis.records import TrialRecord
from profiler.analysis.trial import BaselineRow
from profiler.runs.result import read_result
from profiler.runs.samples import ConfigSamples, ProcessWindow, record_processes

from .conftest import FIXTURES, ROOT
from .test_table_widths import WIDTHS, assert_numbers_whole

RUNS = FIXTURES / "h200" / "runs"
A, B = RUNS / "pytorch_fp16_bs8", RUNS / "ttrt_fp16_bs8"  # recorded p50 5.791 and 0.799 ms
SWEEP = FIXTURES / "h100_sweep" / "runs" / "gpu_sweep"
#: how each process's median moves from the config's figure (geometric mean 1.0)
FACTORS = (1.0, 1.01, 0.99, 1.02, 1 / (1.01 * 0.99 * 1.02))


def samples(
    latency: float, gpu: float, enqueue: float, spread: float = 1.0, rotate: int = 0
) -> ConfigSamples:
    """Five processes (rounds r0..r4) whose medians are the figures times FACTORS (widened by
    ``spread``, shifted by ``rotate`` rounds): their geometric means are the figures."""
    windows = []
    for i in range(len(FACTORS)):
        f = FACTORS[(i + rotate) % len(FACTORS)] ** spread
        windows.append(
            ProcessWindow(
                latency_ms=tuple(latency * f * (1 + d) for d in (-0.01, 0.0, 0.01)),
                gpu_ms=tuple(gpu * f**0.1 * (1 + d) for d in (-0.001, 0.0, 0.001)),
                enqueue_ms=(enqueue * f,) * 3,
                gpu="0",
                round=f"r{i}",
            )
        )
    return ConfigSamples(tuple(windows))


#: both GPU-bound (enqueue far below the GPU time, latency 1.01 x it): latency leads, GPU time
#: cross-checks
GPU_BOUND = (samples(20.0, 19.8, 2.0), samples(10.0, 9.9, 1.0, rotate=1))
#: A launch-bound (enqueue 3.5 ms above its GPU time, 3.0 ms), B GPU-bound: both verdicts,
#: named alike
LAUNCH_BOUND = (samples(9.0, 3.0, 3.5, spread=5), samples(0.51, 0.5, 0.1, rotate=2))


def timed(sides=GPU_BOUND, tmp_path=None) -> CompareTimed:
    return compare_timed(
        read_result(A / "result.json"),
        read_result(B / "result.json"),
        A / "result.json",
        B / "result.json",
        samples=sides,
        floors_dir=tmp_path,
    )


def rendered(draw, width: int = 160) -> str:
    console = Console(file=io.StringIO(), width=width, color_system=None)
    draw(console)
    return console.file.getvalue()


def headline(t: CompareTimed, width: int = 160) -> str:
    from profiler.report.compare_view import print_timed_headline

    return rendered(lambda c: print_timed_headline(t, c), width)


def one_line(text: str) -> str:
    """The text with rich's wrapping undone (lines joined by a space)."""
    return " ".join(line.strip() for line in text.splitlines())


# ---- compare: text ----------------------------------------------------------------------------


def test_compare_text_names_both_verdicts_latency_leading_when_both_are_gpu_bound(tmp_path):
    t = timed(GPU_BOUND, tmp_path)
    assert t.verdicts.lead == "latency"
    text = one_line(headline(t))
    latency = re.search(
        r"latency \(what a caller waits\): B/A = (\S+), 95 % interval "
        r"\[(\S+), (\S+)\] over 5 vs 5 processes \(paired over 5 rounds\): "
        r"B faster",
        text,
    )
    assert latency, text
    assert float(latency.group(1)) == pytest.approx(0.5, abs=1e-3)
    assert float(latency.group(2)) < 0.5 < float(latency.group(3).rstrip(","))
    assert re.search(
        r"cross-check, GPU time \(the device's work\): B/A = 0\.500, 95 % "
        r"interval \[\S+, \S+\] over 5 vs 5 processes \(paired over 5 rounds\): "
        r"B faster",
        text,
    ), text
    assert text.index("latency (what a caller waits): B/A") < text.index("cross-check, GPU")
    assert "how (latency):" in text and "how (GPU time):" in text


def test_compare_text_shows_both_named_and_the_lever_when_a_side_is_launch_bound(tmp_path):
    t = timed(LAUNCH_BOUND, tmp_path)
    assert t.verdicts.lead == "both" and t.processes_a.bound == "launch-bound"
    text = one_line(headline(t))
    assert "cross-check" not in text
    assert "latency (what a caller waits): B/A = " in text
    assert "GPU time (the device's work): B/A = 0.167" in text
    assert "note: launch-bound (A): enqueue p50 3.500 ms >= GPU time 3.000 ms" in text
    assert "`--cuda-graphs`" in text
    assert re.search(r"the latency verdict would need about \d+ processes a side", text)
    # the classification in the processes' table, each side its own
    assert re.search(
        r"bound \(latency, enqueue against GPU time\) +│ +launch-bound \(5 of 5\) +│ "
        r"+GPU-bound \(5 of 5\)",
        headline(t),
    ), headline(t)


def test_fresh_processes_fill_the_main_table_and_the_recorded_runs_keep_their_own(tmp_path):
    t = timed(GPU_BOUND, tmp_path)
    assert t.source == "fresh processes"
    text = headline(t)
    main, recorded = text.split("Recorded runs (result.json)")
    assert main.startswith(
        "Timed windows (no profiler): 5 fresh processes a side, geometric "
        "mean of per-process medians"
    )
    rows = {
        line.split("│")[1].strip(): [c.strip() for c in line.split("│")[2:5]]
        for line in main.splitlines()
        if line.startswith("│")
    }
    assert rows["latency (what a caller waits)"] == ["20 ms", "10.0 ms", "-50.0 %"]
    assert rows["GPU time (the device's work)"][:2] == ["19.8 ms", "9.90 ms"]
    assert rows["processes"] == ["5", "5", ""]
    assert (
        rows["latency: min-max over processes"][0]
        == f"{20 * min(FACTORS):.0f}-{20 * max(FACTORS):.0f} ms"
    )
    # each speedup says what it is: the verdict paired the 5 rounds, so the ratio is theirs
    assert rows["latency speedup (A / B, paired over 5 rounds)"][2] == "2.00x"
    assert rows["GPU-time speedup (A / B, paired over 5 rounds)"][2] == "2.00x"
    # the recorded runs' figures (p50 5.791 and 0.799 ms, printed to what their windows' CVs
    # of 16.9 and 2.4 % allow) only under their own heading
    for figure in ("5.8 ms", "0.80 ms", "1,493.8"):
        assert figure not in main and figure in recorded, figure
    assert "p50 latency" in recorded and "p99 latency" in recorded
    # a mean is always named: never a bare "mean" where it is a geometric one
    assert not re.search(r"(?<!geometric )\bmean\b", text), text


def test_recorded_processes_are_named_so(tmp_path):
    from profiler.analysis.run_analysis import Comparison, RunAnalysis

    text = headline(Comparison(RunAnalysis(A), RunAnalysis(B), "A", "B").timed)
    assert text.startswith("Timed windows (no profiler): 1 recorded process a side")
    assert "GPU time (the device's work): no verdict: GPU time was not measured" in one_line(text)
    assert "Recorded runs (result.json)" in text


def test_an_undecided_verdict_says_how_many_processes_more(tmp_path):
    same_ish = (samples(10.0, 9.0, 1.0, spread=8), samples(10.1, 9.0, 1.0, spread=8, rotate=2))
    text = one_line(headline(timed(same_ish, tmp_path)))
    assert "B/A = 1.010" in text and ": undecided" in text
    assert (
        "note: latency undecided: the difference is within what this machine's noise can "
        "explain; take fresh samples of both with compare --processes 10, more than the 5 "
        "a side here (or --target-noise 2)" in text
    )


def _fresh_cli(cli, monkeypatch, sides, *args):
    """`compare A B --processes 5` with the fresh processes' samples stood in for."""
    import profiler.commands.compare as command

    monkeypatch.setattr(command, "fresh_windows", lambda *_, **__: sides)
    monkeypatch.setenv("COLUMNS", "160")
    done = cli("compare", str(A), str(B), "--processes", "5", "--top", "3", "--view", "full", *args)
    assert done.code == 0, done.stderr
    return done.stdout


def test_compare_command_with_fresh_processes_quotes_the_recorded_run_only_as_such(
    cli, monkeypatch
):
    out = _fresh_cli(cli, monkeypatch, GPU_BOUND)
    head, rest = out.split("Recorded runs (result.json)")
    assert " 20 ms │" in head and "5.791" not in head
    # the overview of the traces leaves out the result.json rows: the table above has them
    overview = rest.split("Overview")[1].split("Kernel time by category")[0]
    assert "(result.json)" not in overview and "profiled steps" in overview
    # every later mention of the recorded p50 is under a heading saying whose it is
    after = rest.split("config A:")[1]
    for line in after.splitlines():
        if "5.791" in line:
            assert line.startswith("A, recorded run: "), line


def test_compare_json_carries_both_verdicts_and_follows_the_schema(cli, monkeypatch):
    import jsonschema

    from profiler.cli.documents import schema_id

    data = json.loads(_fresh_cli(cli, monkeypatch, LAUNCH_BOUND, "--json"))
    assert data["$schema"] == schema_id("compare") == "infer-profiler/compare/7"
    schema = json.loads((ROOT / "docs" / "schema" / "compare.json").read_text())
    errors = [
        f"{list(e.absolute_path)}: {e.message[:200]}"
        for e in jsonschema.Draft202012Validator(schema).iter_errors(data)
    ]
    assert not errors, errors
    timed_doc = data["timed"]
    assert timed_doc["source"] == "fresh processes"
    assert timed_doc["verdict"]["figure"] == "latency"
    assert timed_doc["gpu_verdict"]["figure"] == "gpu_time"
    assert timed_doc["gpu_verdict"]["ratio"] == pytest.approx(0.5 / 3, rel=1e-3)
    assert timed_doc["gpu_speedup_x"] == pytest.approx(6.0, rel=1e-3)
    assert timed_doc["speedup_x"] == pytest.approx(1 / timed_doc["verdict"]["ratio"])
    assert timed_doc["processes_a"]["latency"]["geomean_ms"] == pytest.approx(9.0)
    assert timed_doc["processes_a"]["bound"] == "launch-bound"
    assert timed_doc["verdicts"]["lead"] == "both"
    # the classification as data, no sentence: the views word it
    assert timed_doc["verdicts"]["bound_a"]["word"] == "launch-bound"
    assert "lines" not in timed_doc["verdicts"]
    assert timed_doc["a"]["p50_ms"] == pytest.approx(5.791, abs=1e-3)  # the recorded run's
    # a key the types do not name is refused
    timed_doc["verdict"]["extra"] = 1
    assert not jsonschema.Draft202012Validator(schema).is_valid(data)


def test_compare_html_names_both_verdicts(tmp_path):
    from profiler.report import html

    page = html.timed_block(timed(LAUNCH_BOUND, tmp_path), "eager", "trt")
    text = re.sub(r"<[^>]+>", " ", page).replace("&#x27;", "'")
    text = re.sub(r"\s+", " ", text)
    assert re.search(
        r"latency \(what a caller waits\): B/A = \S+, 95 % interval \[\S+, \S+\] "
        r"over 5 vs 5 processes \(paired over 5 rounds\): B faster",
        text,
    ), text
    assert re.search(r"GPU time \(the device's work\): B/A = 0\.167, 95 % interval", text)
    assert "note: launch-bound (A)" in text
    assert "how (latency):" in text and "how (GPU time):" in text
    main, recorded = text.split("Recorded runs (result.json)")
    assert "5 fresh processes a side" in main and "9.0 ms" in main and "5.791" not in main
    assert "5.8 ms" in recorded  # p50 5.791 ms at CV 16.9 %
    assert "<b class='faster'>B faster</b>" in page


def test_compare_text_fits_narrow_terminals(tmp_path):
    t = timed(LAUNCH_BOUND, tmp_path)
    assert_numbers_whole(lambda width: headline(t, width))


# ---- sweep: terminal, benchmark.md, benchmark.csv, report page --------------------------------


@pytest.fixture(scope="module")
def gpu_time_sweep(tmp_path_factory):
    """The H100 sweep fixture with five processes a cell, GPU time and enqueue measured: the
    eager cells launch-bound, the TensorRT ones GPU-bound."""
    sweep = tmp_path_factory.mktemp("sweep") / "gpu_sweep"
    shutil.copytree(SWEEP, sweep)
    for name, figures in {
        "pytorch_fp16_bs1": (8.0, 2.0, 7.5, 1.0, 0),
        "pytorch_fp16_bs8": (8.0, 4.0, 7.0, 1.0, 0),
        "ttrt_fp16_bs1": (1.0, 0.97, 0.1, 1.0, 1),
        "ttrt_fp16_bs8": (1.6, 1.6, 0.1, 1.0, 2),
    }.items():
        record_processes(sweep / name, samples(*figures), "test")
    return sweep


def _sweep(folder):
    from profiler.analysis.sweep_analysis import SweepAnalysis

    found = SweepAnalysis(folder)
    return found.benchmark, found.manifest, found.rows


def test_sweep_terminal_table_has_a_labelled_column_per_figure(gpu_time_sweep):
    from profiler.report.benchmark_view import print_benchmark

    frame, manifest, rows = _sweep(gpu_time_sweep)
    row = frame.set_index(["backend", "bs"]).loc[("ttrt_fp16", 8)]
    assert row["verdict"] == "faster" and row["gpu_verdict"] == "faster"
    assert row["gpu_speedup"] == pytest.approx(2.5, rel=1e-3)
    assert row["speedup"] == pytest.approx(5.0, rel=1e-3)
    text = rendered(lambda c: print_benchmark(rows, manifest, c), 400)  # headers whole
    # the processes every interval spans, in the header when they are the same for all
    # both figures' verdicts paired the rounds: the header says so, not the processes
    assert re.search(r"latency speedup \[95 %, paired over 5 rounds\] verdict", text)
    assert re.search(r"GPU-time speedup \[95 %, paired over 5 rounds\] verdict", text)
    assert 'a speedup marked "paired over N rounds" is the geometric mean of the ratios' in (
        one_line(text)
    )
    line = next(ln for ln in text.splitlines() if "│ ttrt_fp16    │  8 │" in ln)
    cells = [c.strip() for c in line.split("│")]
    latency = f"5.00x [{row['speedup_low']:.2f}-{row['speedup_high']:.2f}] faster"
    gpu = f"2.50x [{row['gpu_speedup_low']:.2f}-{row['gpu_speedup_high']:.2f}] faster"
    assert latency in cells and gpu in cells
    assert cells.index(latency) < cells.index(gpu)
    assert "GPU-bound" in cells and "1.600" in cells  # bound and GPU ms beside the figures
    words = one_line(text)
    assert "held to a 5 % false discovery rate over the sweep's cells" in words
    # the launch-bound baseline said once for the cells it is launch-bound beside
    assert "note: launch-bound (median enqueue >= GPU time, or latency >= 1.1 x GPU time: " in words
    assert "the baseline pytorch_fp16 at bs 1, 8. Quote the GPU-time verdicts there" in words


def test_sweep_markdown_and_csv_carry_both_verdicts(gpu_time_sweep):
    from profiler.report.benchmark_view import markdown, write_benchmark

    _, manifest, rows = _sweep(gpu_time_sweep)
    text = markdown(rows, manifest)
    head = next(ln for ln in text.splitlines() if ln.startswith("| backend"))
    columns = [
        re.sub(r", (\d+ proc\.|paired over \d+ rounds)\]", "]", c.strip())
        for c in head.strip("|").split("|")
    ]
    assert "latency speedup [95 %] verdict" in columns
    assert "GPU-time speedup [95 %] verdict" in columns and "bound" in columns
    assert "speedup" not in columns and "gpu_verdict" not in columns  # one column a figure
    row = next(ln for ln in text.splitlines() if ln.startswith("| ttrt_fp16 | 8 |"))
    cells = dict(zip(columns, [c.strip() for c in row.strip("|").split("|")]))
    assert cells["latency speedup [95 %] verdict"].startswith("5.00x [")
    assert cells["latency speedup [95 %] verdict"].endswith("] faster")
    assert cells["GPU-time speedup [95 %] verdict"].startswith("2.50x [")
    assert cells["bound"] == "GPU-bound"
    assert "false discovery rate" in text and "## How to read the verdicts" in text
    assert "- ttrt_fp16 bs 8: launch-bound (A)" in text
    write_benchmark(gpu_time_sweep, rows, manifest)
    csv = pd.read_csv(gpu_time_sweep / "benchmark.csv").set_index(["backend", "bs"])
    assert csv.loc[("ttrt_fp16", 8), "verdict"] == "faster"
    assert csv.loc[("ttrt_fp16", 8), "gpu_verdict"] == "faster"
    assert csv.loc[("ttrt_fp16", 8), "gpu_speedup"] == pytest.approx(2.5, rel=1e-3)
    assert csv.loc[("pytorch_fp16", 8), "gpu_verdict"] == "baseline"
    assert "launch-bound (A)" in csv.loc[("ttrt_fp16", 8), "verdict_note"]


def test_sweep_report_page_has_both_verdict_columns(gpu_time_sweep, tmp_path):
    from profiler.commands.report import run

    from .test_report_html import figure_header, sweep_grid, sweep_grid_table

    text = run(
        str(gpu_time_sweep), None, tmp_path / "s.html", peaks_dir=tmp_path / "none"
    ).read_text()
    head = sweep_grid_table(text)["head"]
    latency, gpu_time = figure_header(head, "latency"), figure_header(head, "GPU-time")
    assert latency is not None and gpu_time is not None  # each figure's speedup and verdict
    for column in ("bound", "GPU ms", "p50 ms"):
        assert column in head, column
    rows = sweep_grid(text)
    assert rows[("ttrt_fp16", "8")][gpu_time].startswith("2.50x [")
    assert rows[("ttrt_fp16", "8")][gpu_time].endswith("] faster")
    assert rows[("ttrt_fp16", "8")][latency].endswith("] faster")
    assert rows[("pytorch_fp16", "8")][gpu_time] == "1.00x baseline"
    assert rows[("pytorch_fp16", "8")]["bound"] == "launch-bound"
    assert "false discovery rate" in text and "note (ttrt_fp16 bs 8): launch-bound" in text


def test_sweep_without_gpu_time_says_its_verdicts_are_latency_only():
    from profiler.report.benchmark_view import markdown, print_benchmark

    _, manifest, rows = _sweep(SWEEP)
    text = one_line(rendered(lambda c: print_benchmark(rows, manifest, c), 400))
    assert re.search(r"latency speedup \[95 %(, \d+ proc\.)?\] verdict", text)
    assert "GPU-time" not in text
    assert "GPU time: not measured in these cells" in text
    assert "GPU time: not measured in these cells" in markdown(rows, manifest)


def test_sweep_table_with_gpu_time_fits_narrow_terminals(gpu_time_sweep):
    from profiler.report.benchmark_view import print_benchmark

    _, manifest, rows = _sweep(gpu_time_sweep)

    def render(width):
        return rendered(lambda c: print_benchmark(rows, manifest, c), width)

    assert_numbers_whole(render)
    for width in WIDTHS:  # both verdicts stay, whatever gives way
        text = render(width)
        assert "GPU-time" in text and "latency" in text and "│ ttrt_fp16 " in text, width


# ---- advise --try -----------------------------------------------------------------------------


def _trial_rows():
    from profiler.analysis.records import Bound, TimedVerdicts
    from profiler.analysis.trial import TrialRow

    faster = TrialRow(
        "backend ttrt_fp16",
        {"backend": "ttrt_fp16"},
        ["launch-bound"],
        "ok",
        p50_ms=1.25,
        processes=5,
        speedup=4.1,
        low=3.2,
        high=5.3,
        verdict="faster",
        gpu_speedup=2.45,
        gpu_low=2.41,
        gpu_high=2.49,
        gpu_verdict="faster",
        bound="GPU-bound",
        verdicts=TimedVerdicts(
            None,
            None,
            Bound("launch-bound", 5, 5, enqueue_p50_ms=5.0, gpu_p50_ms=3.0),
            Bound("GPU-bound", 0, 5),
            "both",
        ),
    )
    same = TrialRow(
        "--cuda-graphs",
        {"cuda_graphs": True},
        ["launch-bound"],
        "ok",
        p50_ms=5.0,
        processes=5,
        speedup=1.01,
        low=0.93,
        high=1.10,
        verdict="undecided",
        gpu_speedup=1.0,
        gpu_low=0.99,
        gpu_high=1.01,
        gpu_verdict="same",
        bound="launch-bound",
    )
    return [faster, same]


BASE = BaselineRow(
    status="ok", reason=None, processes=5, p50_ms=5.1, gpu_ms=3.0, bound="launch-bound"
)
TRIAL = TrialRecord(folder="runs/advise_x", wall_s=10.0, rounds_s=5.0, processes=5)


class _Plan:
    experiments: list = []
    without: dict = {}


def test_advise_try_table_has_both_verdicts_and_their_lines():
    from profiler.report.trial_view import print_trial

    text = rendered(lambda c: print_trial(_trial_rows(), BASE, TRIAL, _Plan(), c), 400)
    for column in ("latency speedup [95 %] verdict", "GPU-time speedup [95 %] verdict", "bound"):
        assert column in text, column
    line = next(ln for ln in text.splitlines() if "│ backend ttrt_fp16" in ln)
    cells = [c.strip() for c in line.split("│")]
    assert cells.index("4.10x [3.20-5.30] faster") < cells.index("2.45x [2.41-2.49] faster")
    assert "GPU-bound" in cells
    assert "1.00x [0.99-1.01] same" in text
    words = one_line(text)
    assert (
        "baseline (the run re-run): latency p50 5.100 ms, GPU time 3.000 ms (geometric mean "
        "of per-process medians over 5 process(es)), launch-bound" in words
    )
    assert "note (backend ttrt_fp16): launch-bound (A): enqueue p50 5.000 ms >= GPU time" in words
    assert "held to a 5 % false discovery rate over the experiments" in words


def test_advise_try_page_has_both_verdicts():
    from profiler.report.trial_view import trial_html

    page = trial_html("runs/x", [], _Plan(), _trial_rows(), BASE, TRIAL)
    for header in (
        "latency speedup (x)",
        "latency verdict",
        "GPU-time speedup (x)",
        "GPU-time verdict",
        "GPU-time 95 % low",
        "bound",
    ):
        assert f"<th>{header}</th>" in page, header
    assert "How to read the verdicts" in page and "launch-bound (A): enqueue p50" in page
    assert "GPU time (ms, geometric mean of per-process medians)" in page
