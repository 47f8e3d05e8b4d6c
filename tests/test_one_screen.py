"""The answer on one screen and text that reads right (issue 48 points 5 and 6): `compare` puts
the verdicts and the largest changes first within 40 lines at 80 columns, the tables behind
--view; summarize's breakdown definitions only on request; prose wrapped to the width without
splitting a path, a field name or a number from its unit; a sweep's launch-bound notes said
once; the text fixes; CPU tables in one unit a column; `run --help` naming the backends."""

import re

from rich.console import Console

from profiler.report.console import break_points, print_prose
from profiler.report.fmt import TimeColumn
from tests.conftest import FIXTURES, ROOT

H200 = FIXTURES / "h200" / "runs"
PAIR = (str(H200 / "pytorch_fp16_bs8"), str(H200 / "ttrt_fp16_bs8"))


# ---- compare: the answer first -----------------------------------------------------------------


def test_compare_answers_within_40_lines_at_80_columns(cli, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    done = cli("compare", *PAIR)
    assert done.code == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) <= 40, done.stdout
    assert max(map(len, lines)) <= 80
    assert lines[0].startswith("latency (what a caller waits): ")
    assert "Largest changes" in done.stdout and "why B differs from A" in done.stdout
    # the tables are behind --view: the config, the processes, the kernels
    for behind in ("Config and environment fields", "Recorded runs", "Kernel time by category"):
        assert behind not in done.stdout, behind
    assert "--view full" in done.stdout


def test_compare_full_view_and_verbose_keep_every_table(cli):
    full = cli("compare", *PAIR, "--view", "full")
    verbose = cli("compare", *PAIR, "-v")
    assert full.code == verbose.code == 0, (full.stderr, verbose.stderr)
    for table in ("Config and environment fields", "Recorded runs", "Kernel time by category"):
        assert table in full.stdout and table in verbose.stdout, table
    assert full.stdout == verbose.stdout
    timed = cli("compare", *PAIR, "--view", "timed").stdout
    assert "Config and environment fields" in timed and "Kernel time by category" not in timed
    diff = cli("compare", *PAIR, "--view", "diff").stdout
    assert "Kernel time by category" in diff and "Recorded runs" not in diff


def test_compare_refuses_an_unknown_view_in_one_line(cli):
    done = cli("compare", *PAIR, "--view", "everything")
    assert done.code == 2 and len(done.stderr.strip().splitlines()) == 1
    assert "everything" in done.stderr and "Traceback" not in done.stderr


# ---- summarize: definitions on request ---------------------------------------------------------


def test_breakdown_definitions_only_on_request(cli):
    overview = cli("summarize", PAIR[0], "--view", "overview")
    assert overview.code == 0, overview.stderr
    assert "Breakdown definitions" not in overview.stdout
    assert "--view definitions" in overview.stdout  # the step table says where they are
    asked = cli("summarize", PAIR[0], "--view", "definitions")
    assert asked.code == 0, asked.stderr
    assert "Breakdown definitions" in asked.stdout
    title = next(line for line in asked.stdout.splitlines() if "Breakdown definitions" in line)
    assert "memcpy/memset read alike" in title and ";  " not in title


def test_the_profiled_step_is_not_called_slower_than_the_timed_window(cli):
    done = cli("summarize", PAIR[0], "--view", "overview")
    assert "slower than the timed window" not in done.stdout
    assert "not a latency to quote" in done.stdout


# ---- prose: wrapped at the width, nothing split --------------------------------------------


def test_prose_breaks_at_spaces_only_and_never_between_a_number_and_its_unit():
    text = (
        "the latency verdict would need about 12 processes a side for ±5 %; see "
        "runs/a_very_long_sweep_name/pytorch_fp16_bs8_with_a_long_suffix/result.json and "
        "timing.p50_ms, 4.29 ms against 3.1 ms"
    )
    for width in range(20, 90):
        lines = [text[start:end] for start, end in break_points(text, width)]
        assert " ".join(lines) == text
        for line in lines:
            assert not line.startswith(("%", "ms")), (width, line)
    console = Console(record=True, width=60, force_terminal=False)
    print_prose(console, "[yellow]note:[/] " + text)
    shown = console.export_text().splitlines()
    assert all(len(line) <= 60 or " " not in line.strip() for line in shown)
    path = "runs/a_very_long_sweep_name/pytorch_fp16_bs8_with_a_long_suffix/result.json"
    assert any(path in line for line in shown)  # a path is never split


# ---- CPU tables: one unit a column ---------------------------------------------------------


def test_a_time_column_takes_one_unit_from_its_largest_value():
    seconds = TimeColumn([2_487_216.94, 1_234.0, 5.0])
    assert seconds.unit == "s" and seconds(2_487_216.94) == "2.487" and seconds(5.0) == "0.000"
    millis = TimeColumn([1_234.0, 5.0])
    assert millis.unit == "ms" and millis(1_234.0) == "1.23"
    assert millis.signed(-5.0) == "[green]-0.01[/]"
    assert TimeColumn([12.5]).unit == "µs" and TimeColumn([]).unit == "µs"


# ---- help and docs -------------------------------------------------------------------------


def test_run_help_names_every_backend(cli, monkeypatch):
    from profiler.runs.backends import names

    monkeypatch.setenv("COLUMNS", "200")
    done = cli("run", "--help")
    text = " ".join(done.stdout.split())
    assert all(name in text for name in names()), text


def test_running_md_names_every_backend_that_runs_on_a_cpu():
    from profiler.runs.backends import BACKENDS

    text = (ROOT / "docs" / "guide" / "running.md").read_text()
    cpu = text[text.index("### What to expect on a CPU") :]
    paragraph = " ".join(cpu.split("\n\n")[1].split())
    on_cpu = {name for name, spec in BACKENDS.items() if not spec.needs_cuda}
    named = set(re.findall(r"`(\w+)`", paragraph)) & set(BACKENDS)
    assert named == on_cpu
    words = ["no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]
    assert f"Without a GPU {words[len(on_cpu)]} backends run" in paragraph


# ---- a sweep's notes: what cells share, said once --------------------------------------------


def test_a_sweeps_launch_bound_cells_are_named_in_one_line_with_the_lever_once():
    from profiler.analysis.records import BenchmarkCell, Bound, TimedVerdicts
    from profiler.analysis.timed_verdict import LEVER
    from profiler.report.benchmark_view import grouped_notes
    from profiler.runs.manifest import SweepManifest

    gpu, launch = Bound("GPU-bound", 0, 5, 0.2, 1.0), Bound("launch-bound", 4, 5, 0.9, 1.0)

    def verdicts(a, b, needed):
        return TimedVerdicts(None, None, a, b, "both", latency_processes_for_5pct=needed)

    found = [
        ("pytorch_fp16", 1, verdicts(launch, launch, 30)),
        ("inductor_fp16", 1, verdicts(launch, launch, 12)),
        ("ttrt_fp16", 1, verdicts(launch, gpu, 9)),
        ("inductor_fp16", 8, verdicts(gpu, launch, None)),
    ]
    rows = [
        BenchmarkCell(
            model="resnet50",
            device="NVIDIA H100",
            backend=backend,
            bs=bs,
            verdicts=v,
            baseline="pytorch_fp16",
            status="ok",
            reason="",
            gpu="",
            node="",
        )
        for backend, bs, v in found
    ]
    manifest = SweepManifest(
        options={},
        name="s",
        model="resnet50",
        backends=["pytorch_fp16", "inductor_fp16", "ttrt_fp16"],
        batch_sizes=[1, 8],
        baseline="pytorch_fp16",
        cells={},
    )
    lines = grouped_notes(rows, manifest)
    assert len(lines) == 1, lines
    line = lines[0]
    assert line.count(LEVER) == 1 and line.count("launch-bound") == 1
    for cell in ("pytorch_fp16 bs 1", "inductor_fp16 bs 1", "inductor_fp16 bs 8"):
        assert cell in line
    assert "the baseline pytorch_fp16 at bs 1" in line
    assert "ttrt_fp16 bs 1 9" in line  # the processes its latency verdict would need
