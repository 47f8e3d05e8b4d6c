"""The summarize command end to end: bad input, CPU-only traces, targets, exports."""

import gzip
import json
import os
import subprocess
import sys

import pytest

from .conftest import ROOT, V100_TRACE


def run_cli(*args, cwd=ROOT):
    """`profile.py summarize ARGS` in a fresh process: what the user's terminal shows."""
    env = dict(os.environ, COLUMNS="200")
    return subprocess.run(
        [sys.executable, str(ROOT / "profile.py"), "summarize", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=120,
    )


@pytest.fixture
def summarize(cli, monkeypatch):
    """`summarize ARGS` in the test's process (cwd: its tmp_path), 200 columns wide: for the
    tests of what it prints, which need no fresh process."""
    monkeypatch.setenv("COLUMNS", "200")
    return lambda *args: cli("summarize", *map(str, args))


def _bad_inputs(tmp):
    empty = tmp / "empty.json"
    empty.write_bytes(b"")
    truncated = tmp / "truncated.json"
    truncated.write_text('{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 1')
    not_gzip = tmp / "fake.json.gz"
    not_gzip.write_text('{"traceEvents": []}')
    no_events = tmp / "no_events.json"
    no_events.write_text('{"schemaVersion": 1, "deviceProperties": []}')
    truncated_gz = tmp / "truncated.json.gz"
    truncated_gz.write_bytes(gzip.compress(b'{"traceEvents": [' + b" " * 1000)[:30])
    no_traces = tmp / "nothing_here"
    no_traces.mkdir()
    (no_traces / "notes.txt").write_text("hello")
    return {
        "missing path": (tmp / "does_not_exist.json", "no such file"),
        "empty file": (empty, "is empty"),
        "truncated JSON": (truncated, "not valid JSON"),
        ".gz that is not gzip": (not_gzip, "not gzip"),
        "truncated gzip": (truncated_gz, "gzip"),
        "JSON without traceEvents": (no_events, "no traceEvents"),
        "folder with no traces": (no_traces, "no trace files"),
    }


def test_bad_input_gives_one_line_and_nonzero_exit(tmp_path, summarize):
    # the first case in a fresh process, as the user's terminal shows it; the others in this one
    # (an exception that escaped would fail the test: the cli fixture raises it)
    for index, (case, (path, words)) in enumerate(_bad_inputs(tmp_path).items()):
        if index == 0:
            fresh = run_cli(path)
            code, stderr = fresh.returncode, fresh.stderr
        else:
            here = summarize(path)
            code, stderr = here.code, here.stderr
        assert code != 0, case
        lines = stderr.strip().splitlines()
        assert len(lines) == 1, (case, stderr)
        assert lines[0].startswith("error:") and words in lines[0], (case, lines[0])
        assert "Traceback" not in stderr


def test_unknown_view_is_a_user_error():
    result = run_cli(V100_TRACE, "--view", "flames")
    assert result.returncode == 2 and "unknown --view" in result.stderr


@pytest.fixture(scope="module")
def cpu_only_trace(tmp_path_factory):
    """A real CPU-only trace: torch.profiler on a tiny CPU model (the test may import torch; the
    analysis package never does)."""
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile, schedule

    path = tmp_path_factory.mktemp("cpu") / "cpu_only.pt.trace.json"
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3),
        torch.nn.ReLU(),
        torch.nn.Flatten(),
        torch.nn.Linear(8 * 14 * 14, 10),
    )
    x = torch.randn(2, 3, 16, 16)
    with profile(
        activities=[ProfilerActivity.CPU],
        schedule=schedule(wait=1, warmup=1, active=3),
        on_trace_ready=lambda p: p.export_chrome_trace(str(path)),
    ) as prof:
        for _ in range(6):
            with torch.no_grad():
                model(x)
            prof.step()
    return path


def test_cpu_only_trace_is_not_an_error(cpu_only_trace, summarize):
    result = summarize(cpu_only_trace)
    assert result.code == 0, result.stderr
    assert "no GPU activity was recorded" in result.stdout
    assert "aten::conv2d" in result.stdout
    data = json.loads(summarize(cpu_only_trace, "--json").stdout)
    assert data["overview"]["steps"] == 3
    assert data["overview"]["devices"] == [] and data["kernels"] == []
    ops = {op["operator"]: op for op in data["operators"]}
    assert ops["aten::conv2d"]["calls"] == 3
    assert ops["aten::conv2d"]["cpu_self_us"] <= ops["aten::conv2d"]["cpu_total_us"]


def test_v100_tables_json_and_exports(tmp_path, summarize):
    result = summarize(V100_TRACE, "--top", "5", "--out", tmp_path / "out")
    assert result.code == 0, result.stderr
    for words in (
        "GPU 0 utilization",
        "55.5 %",
        "occupancy: Kineto est.",
        "occupancy: theoretical (computed)",
        "cudnn::detail::dgrad_engine",
        "Kernel time by category",
        "CPU operators",
    ):
        assert words in result.stdout, words
    files = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert files == [
        "categories.csv",
        "kernels.csv",
        "operators.csv",
        "steps.csv",
        "summary.json",
        "summary.md",
    ]
    data = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert len(data["kernels"]) == 67  # exports are never cut to --top
    assert "| kernel |" in (tmp_path / "out" / "summary.md").read_text()


def test_targets_run_folder_and_run_name(tmp_path, summarize):
    # runs/<run>/result.json names the trace relative to the repository root
    (tmp_path / "tb_logs" / "pytorch_fp32_bs8").mkdir(parents=True)
    older = tmp_path / "tb_logs" / "pytorch_fp32_bs8" / "a.pt.trace.json.gz"
    newer = tmp_path / "tb_logs" / "pytorch_fp32_bs8" / "b.pt.trace.json.gz"
    older.write_bytes(V100_TRACE.read_bytes())
    newer.write_bytes(V100_TRACE.read_bytes())
    os.utime(older, (1, 1))
    run = tmp_path / "runs" / "pytorch_fp32_bs8"
    run.mkdir(parents=True)
    (run / "result.json").write_text(
        json.dumps(
            {
                "trace": {
                    "dir": "tb_logs/pytorch_fp32_bs8",
                    "files": ["tb_logs/pytorch_fp32_bs8/a.pt.trace.json.gz"],
                }
            }
        )
    )
    by_name = summarize("pytorch_fp32_bs8", "--view", "categories")  # cwd: tmp_path
    assert by_name.code == 0, by_name.stderr
    assert "convolution" in by_name.stdout
    # this result.json names its trace but is no run result: one line says what is not shown
    assert (
        by_name.stderr.count("\n") == 1
        and "is not a run result this version reads" in by_name.stderr
        and "the timed window, config and roofline are not shown" in by_name.stderr
    )
    # a folder of several traces: the newest is used, and we say so on stderr
    folder = summarize(tmp_path / "tb_logs" / "pytorch_fp32_bs8", "--view", "categories")
    assert folder.code == 0
    assert "using the newest, b.pt.trace.json.gz" in folder.stderr


H100_STACKS = ROOT / "tests/fixtures/h100_stacks/h100_pytorch_fp16_bs8_stacks.pt.trace.json.gz"


def test_long_step_table_is_summarised_unless_asked(summarize):
    """10 steps with --top 4: the 4 slowest and 4 fastest steps and the distribution; with
    --top 0 every step."""
    steps = json.loads(summarize(H100_STACKS, "--json").stdout)["overview"]["per_step"]
    by_time = sorted(steps, key=lambda s: -s["step_us"])
    short = summarize(H100_STACKS, "--view", "overview", "--top", "4")
    assert short.code == 0, short.stderr
    assert "10 steps, the 4 slowest and 4 fastest" in short.stdout
    table = short.stdout[short.stdout.index("Step time breakdown") :]
    shown = [s["step"] for s in steps if f" {s['step']} " in table]
    assert sorted(shown) == sorted(s["step"] for s in by_time[:4] + by_time[-4:])
    assert table.index(by_time[0]["step"] + " ") < table.index(by_time[1]["step"] + " ")
    for row in ("min", "median", "p90", "max", "mean"):
        assert f" {row} " in table
    assert f"{by_time[0]['step_us']:,.2f}" in table.split(" max ")[1].splitlines()[0]
    full = summarize(H100_STACKS, "--view", "overview", "--top", "0").stdout
    assert all(f" {s['step']} " in full for s in steps) and " p90 " not in full


def test_out_of_a_run_carries_its_headline_and_advice(tmp_path, summarize):
    """summarize --out of a run folder writes what the terminal opens with: the timed window
    (p50, noise warnings, config) and the roofline and advice, in summary.md and summary.json
    (the latter as --json has them)."""
    from .conftest import FIXTURES

    cell = FIXTURES / "h100_sweep" / "runs" / "gpu_sweep" / "pytorch_fp16_bs8"
    result = summarize(cell, "--out", tmp_path / "out")
    assert result.code == 0, result.stderr
    md = (tmp_path / "out" / "summary.md").read_text()
    for words in (
        "## Timed window (no profiler attached; quote these)",
        "- p50 latency: 7.937 ms",
        "- warning: noisy",
        "- config: model=resnet50",
        "## Roofline and advice",
        "- advice: GPU idle between kernels",
    ):
        assert words in md, words
    assert md.index("p50 latency") < md.index("## Kernels")
    written = json.loads((tmp_path / "out" / "summary.json").read_text())
    printed = json.loads(summarize(cell, "--json").stdout)
    assert written["headline"] == printed["headline"]
    assert written["insight"] == printed["insight"] and written["insight"]["advice"]


def test_out_of_a_bare_trace_has_no_headline(tmp_path, summarize):
    result = summarize(V100_TRACE, "--out", tmp_path / "out")
    assert result.code == 0, result.stderr
    assert "headline" not in json.loads((tmp_path / "out" / "summary.json").read_text())
    assert "Timed window" not in (tmp_path / "out" / "summary.md").read_text()
