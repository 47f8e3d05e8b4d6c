"""Where a run's seconds go (profiler.runs.phases): every run records its phases in result.json and
`run` prints them on one line. Only sanity relations are checked, never durations."""

import json
import time

import pytest

from profiler import runs
from profiler.collect import harness
from profiler.runs import phases
from profiler.runs.config import RunConfig
from tests.conftest import ROOT

FORWARD_PHASES = [
    "build",
    "flops",
    "prepare",
    "first_call",
    "warm_up",
    "timed",
    "profile",
    "trace_write",
    "numerics",
    "write",
]


def _timed_run(tmp_path, monkeypatch, **options):
    monkeypatch.syspath_prepend(str(ROOT))
    config = RunConfig(
        batch_size=2,
        iters=2,
        timed_warmup=0,
        wait=0,
        warmup=1,
        active=1,
        runs_dir=tmp_path / "runs",
        tb_dir=tmp_path / "tb_logs",
        **options,
    )
    began = time.perf_counter()
    result = harness.run(config, quiet=True)
    return result, time.perf_counter() - began


def _check_sums(result, wall_around_run: float) -> None:
    timing = result.timing
    assert all(seconds >= 0 for seconds in timing.phases_s.values())
    # started in-process, not through profile.py: no imports phase is claimed
    assert "imports" not in timing.phases_s
    # each figure is rounded to the millisecond: their sum may pass the rounded wall by that
    rounding = 0.0005 * (len(timing.phases_s) + 1)
    assert sum(timing.phases_s.values()) <= timing.wall_s + rounding
    assert timing.wall_s <= wall_around_run + 0.0005
    assert timing.phases_s["build"] == pytest.approx(timing.model_build_s, abs=1e-3)
    assert timing.phases_s["prepare"] == pytest.approx(timing.prepare_s, abs=1e-3)
    # what result.json says is what the run returned
    written = runs.read_result(result.run_dir)
    assert written.timing.phases_s == timing.phases_s and written.timing.wall_s == timing.wall_s


def test_a_forward_run_records_its_phases_in_order(tmp_path, monkeypatch):
    result, wall = _timed_run(
        tmp_path, monkeypatch, model="tests.tiny_models:conv_net", backend="pytorch_bf16"
    )
    assert list(result.timing.phases_s) == FORWARD_PHASES
    _check_sums(result, wall)


def test_a_generation_run_records_the_phases_that_apply(tmp_path, monkeypatch):
    result, wall = _timed_run(
        tmp_path,
        monkeypatch,
        model="tests.tiny_models:tiny_gpt2",
        backend="pytorch_bf16",
        workload="generate",
        prompt_len=5,
        max_new_tokens=3,
    )
    # a decoder-only LM counts its prefill's and one decode step's FLOPs (per-phase roofline);
    # its phases' GPU time is measured apart only on a GPU
    assert list(result.timing.phases_s) == FORWARD_PHASES
    _check_sums(result, wall)


def test_cuda_profiler_api_capture_has_a_profile_window_and_no_trace_write(tmp_path, monkeypatch):
    result, wall = _timed_run(
        tmp_path,
        monkeypatch,
        model="tests.tiny_models:conv_net",
        backend="pytorch_fp32",
        capture="cuda-profiler-api",
    )
    assert "profile" in result.timing.phases_s and "trace_write" not in result.timing.phases_s
    assert "numerics" in result.timing.phases_s  # the check says why it skipped, in no time
    _check_sums(result, wall)


def test_run_prints_the_seconds_on_one_line(cli):
    done = cli(
        "run",
        "--model",
        "tests.tiny_models:conv_net",
        "--bs",
        "2",
        "--iters",
        "2",
        "--timed-warmup",
        "0",
        "--active",
        "1",
    )
    assert done.code == 0, done.stderr
    line = next(line for line in done.stdout.splitlines() if line.startswith("seconds: "))
    assert line.startswith("seconds: build ") and ", first call " in line
    assert ", trace write " in line and "; total " in line


def test_the_line_shows_compile_and_cache_load_inside_prepare():
    from profiler.report.fmt import phases_line

    seen = {
        "imports": 2.04,
        "build": 5.71,
        "prepare": 8.4,
        "first_call": 1.1,
        "after_windows": 0.5,
        "write": 0.06,
    }
    assert phases_line(seen, 23.4, compile_s=7.1) == (
        "seconds: imports 2.0, build 5.7, prepare 8.4 (compile 7.1), first call 1.1, "
        "layer timing 0.5, write 0.1; total 23.4"
    )
    assert "prepare 8.4 (cache load 3.3)," in phases_line(seen, None, cache_load_s=3.3)
    assert phases.ordered({"write": 0.1234, "build": 1.0}) == {"build": 1.0, "write": 0.123}


def test_a_run_through_profile_py_records_its_imports(tmp_path):
    from tests.conftest import run_python

    done = run_python(
        str(ROOT / "profile.py"),
        "run",
        "--model",
        "tests.tiny_models:conv_net",
        "--bs",
        "2",
        "--iters",
        "2",
        "--timed-warmup",
        "0",
        "--active",
        "1",
        "--runs-dir",
        str(tmp_path / "runs"),
        "--tb-dir",
        str(tmp_path / "tb"),
        "--json",
    )
    assert done.returncode == 0, done.stderr
    timing = runs.result_from_dict(json.loads(done.stdout)).timing
    assert timing.phases_s["imports"] > 0 and list(timing.phases_s)[0] == "imports"
    assert sum(timing.phases_s.values()) <= timing.wall_s
