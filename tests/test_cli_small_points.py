"""The small things a daily user meets: a view a run has nothing for, a run compared with
itself, a sweep folder given to summarize, output cut short by `| head`, the run table's units
and thousands separators."""

import io
import subprocess
import sys

from rich.console import Console

from tests.conftest import FIXTURES, ROOT, default_signals

H200 = FIXTURES / "h200" / "runs"
SWEEP = FIXTURES / "h100_sweep" / "runs" / "gpu_sweep"


def test_phases_view_of_a_forward_run_says_it_has_none(cli):
    done = cli("summarize", str(H200 / "pytorch_fp16_bs8"), "--view", "phases")
    assert done.code == 2 and done.stdout == ""
    assert done.stderr.strip().startswith("error: no generation phases in ")
    assert "--workload generate" in done.stderr and len(done.stderr.splitlines()) == 1
    generated = FIXTURES / "h100_generate" / "runs" / "inductor_fp16_bs1_fixture"
    done = cli("summarize", str(generated), "--view", "phases")
    assert done.code == 0 and "Phases" in done.stdout, done.stderr


def test_a_run_compared_with_itself_gets_a_note(cli):
    run = str(H200 / "pytorch_fp16_bs8")
    done = cli("compare", run, run + "/")
    assert done.code == 0, done.stderr
    assert "note: A and B are the same run" in done.stderr
    other = cli("compare", run, str(H200 / "ttrt_fp16_bs8"))
    assert other.code == 0 and "same run" not in other.stderr


def test_summarize_of_a_sweep_folder_says_what_it_is(cli):
    done = cli("summarize", str(SWEEP))
    assert done.code == 2 and len(done.stderr.splitlines()) == 1
    assert (
        f"error: {SWEEP} is a sweep folder: summarize one of its cells (e.g. {SWEEP}/"
        in done.stderr
    )
    assert f"`report {SWEEP}`" in done.stderr and "no trace files" not in done.stderr


def test_output_cut_short_by_head_exits_0_quietly():
    """`profile.py summarize ... | head -1`: the reader leaves early; exit 0, nothing on stderr
    (rich's console exited 1)."""
    for args in (
        ["summarize", str(H200 / "pytorch_fp16_bs8"), "--top", "0"],
        ["summarize", str(H200 / "pytorch_fp16_bs8"), "--top", "0", "--json"],
    ):
        process = subprocess.Popen(
            [sys.executable, "profile.py", *args],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            preexec_fn=default_signals,
        )
        process.stdout.readline()
        process.stdout.close()  # as head does after its line
        assert process.wait(timeout=120) == 0, args
        assert process.stderr.read() == b"", args


def test_run_table_has_its_units_in_the_headers_and_separates_thousands():
    from profiler.report.fmt import time
    from profiler.report.run_view import print_result
    from profiler.runs.result import read_result

    assert time(1150.0531, labelled=False) == "1,150.053" and time(1150.0531) == "1,150.053 ms"
    console = Console(file=io.StringIO(), width=200, color_system=None)
    print_result(read_result(H200 / "pytorch_fp16_bs8" / "result.json"), console)
    text = console.file.getvalue()
    header = next(line for line in text.splitlines() if "p50" in line)
    for column in ("p50 ms", "p90 ms", "p99 ms", "max ms", "IQR ms", "peak alloc MiB"):
        assert column in header, column
    row = text.splitlines()[text.splitlines().index(header) + 2]
    assert " ms " not in row and "MiB" not in row and "1,493.8" in row
