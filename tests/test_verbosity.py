"""-q/--quiet and -v/--verbose on every command, the ``next:`` hints under the name the user
typed, and the rank a trace carries for Holistic Trace Analysis."""

import gzip
import json
import subprocess
import sys

import pytest

from .conftest import FIXTURES, ROOT
from .test_cli_names import console_script

RUNS = FIXTURES / "h200" / "runs"
TINY_RUN = [
    "run",
    "--model",
    "tests.tiny_models:conv_net",
    "--bs",
    "1",
    "--iters",
    "2",
    "--timed-warmup",
    "0",
    "--active",
    "1",
    "--image-size",
    "16",
    "--no-cache",
]


def start(command: list[str], cwd, **env) -> subprocess.CompletedProcess:
    import os

    environ = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    environ.update(PYTHONPATH=str(ROOT), COLUMNS="200", **env)
    return subprocess.run(
        command, capture_output=True, text=True, cwd=cwd, timeout=300, env=environ
    )


@pytest.fixture(scope="module")
def console_run(tmp_path_factory):
    """A tiny CPU run started as the installed console script would start it."""
    folder = tmp_path_factory.mktemp("console")
    done = start([str(console_script(folder)), *TINY_RUN], folder)
    assert done.returncode == 0, done.stderr[-3000:]
    return folder, done


def test_next_hints_name_the_console_script(console_run):
    _, done = console_run
    hints = [line for line in done.stdout.splitlines() if line.startswith("next:")]
    assert hints and all(line.startswith("next: infer-profile ") for line in hints), hints
    assert "python profile.py" not in done.stdout


def test_next_hints_name_profile_py():
    from profiler.analysis.result_analysis import next_steps
    from profiler.runs.result import read_result

    result = read_result(RUNS / "ttrt_fp16_bs8")
    assert all(h.startswith("python profile.py ") for h in next_steps(result))
    hints = next_steps(result, "infer-profile")
    assert hints and all(h.startswith("infer-profile ") for h in hints)


def test_command_name_follows_argv(monkeypatch):
    from profiler.cli import guard

    monkeypatch.setattr(sys, "argv", ["/usr/local/bin/infer-profile", "run"])
    assert guard.command_name() == "infer-profile"
    monkeypatch.setattr(sys, "argv", ["profile.py", "run"])
    assert guard.command_name() == "python profile.py"


def test_traces_carry_a_rank_for_holistic_trace_analysis(console_run):
    folder, _ = console_run
    traces = list((folder / "tb_logs").rglob("*.pt.trace.json.gz"))
    assert traces
    for trace in traces:
        data = json.loads(gzip.decompress(trace.read_bytes()))
        assert data["distributedInfo"] == {"rank": 0, "world_size": 1}


# a quiet run's output: tests/test_runs.py::test_a_run_caches_under_xdg_cache_home (one real
# run checks both)


def test_quiet_and_verbose_before_or_after_the_command(cli, tmp_path):
    a, b = str(RUNS / "pytorch_fp16_bs8"), str(RUNS / "ttrt_fp16_bs8")
    loud = cli("compare", a, b, "--out", str(tmp_path / "d1"))
    assert loud.code == 0 and "wrote 6 files" in loud.stderr
    for args in (["-q", "compare", a, b], ["compare", a, b, "-q"], ["compare", a, b, "--quiet"]):
        done = cli(*args, "--out", str(tmp_path / "d2"))
        assert done.code == 0 and done.stderr == "", (args, done.stderr)
        assert "B faster" in done.stdout  # the results stay
    for args in (["-v", "compare", a, b], ["compare", a, b, "--verbose"]):
        done = cli(*args)
        assert done.code == 0
        assert f"result {a}/result.json" in done.stderr and "A: trace " in done.stderr, args
    assert "trace:" not in cli("summarize", a).stderr
    assert "trace: " in cli("summarize", a, "-v").stderr


def test_warnings_stay_under_quiet(cli, tmp_path):
    script = (
        "import sys; sys.modules['matplotlib'] = None; sys.argv = ['profile.py']; "
        f"sys.path.insert(0, {str(ROOT)!r}); from profiler.cli.app import main; "
        f"sys.exit(main(['-q', 'report', {str(RUNS / 'ttrt_fp16_bs8')!r}, '--out', "
        f"{str(tmp_path / 'r.html')!r}]))"
    )
    done = start([sys.executable, "-c", script], tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stderr.startswith("warning: ") and "matplotlib" in done.stderr


def test_verbose_error_shows_the_traceback_quiet_and_verbose_exclude(cli):
    plain = cli("summarize", "no_such_run")
    assert plain.code == 2 and plain.stderr.count("\n") == 1
    verbose = cli("summarize", "no_such_run", "-v")
    assert verbose.code == 2 and verbose.stderr.startswith("error: no such file")
    assert "Traceback (most recent call last)" in verbose.stderr
    assert "profiler/runs/command_targets.py" in verbose.stderr
    both = cli("-q", "-v", "backends")
    assert (
        both.code == 2 and both.stderr == "error: -q/--quiet and -v/--verbose exclude each other\n"
    )


def test_every_command_takes_quiet_and_verbose(cli):
    import typer.main

    from profiler.cli.app import app

    def commands(group, prefix=""):  # a group's commands, those of its groups (history) too
        for name, command in group.commands.items():
            if hasattr(command, "commands"):
                yield from commands(command, f"{prefix}{name} ")
            else:
                yield prefix + name, command

    found = dict(commands(typer.main.get_command(app)))
    assert {"run", "history check", "history add"} <= set(found)
    for name, command in found.items():
        flags = {opt for param in command.params for opt in param.opts}
        assert {"-q", "--quiet", "-v", "--verbose"} <= flags, name
