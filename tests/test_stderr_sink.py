"""Every line on stderr goes through the output sink (profiler.cli.output.Output), progress bars
included, so -q/--quiet and -v/--verbose hold everywhere: the package writes stderr nowhere else
(read from the source), and commands run with -q on CPU say nothing there."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

from .conftest import FIXTURES, ROOT

PACKAGE = ROOT / "profiler"
#: the sink itself
SINK = "cli/output.py"
#: (file under profiler/, function) -> why it writes stderr itself
ALLOWED = {
    ("sweep/cell.py", "_run"): "a sweep worker's run: fd 2 is the cell's log file there (no "
    "terminal, no -q), which gets what `run` would say; its last error line is the cell's reason",
    ("collect/ranks.py", "rank_main"): "a rank of run --nproc, a process the launcher started: "
    "rank 0's progress goes to the fd 2 it inherited from the command, none with -q or from "
    "another rank, as the sink's err_console would write it",
    ("collect/device.py", "captured_stderr"): "hands back, filtered, what native libraries "
    "(Kineto, TensorRT) wrote on fd 2 during the block: not the tool's own lines",
}
#: calls that write to stderr when given no file
TO_STDERR_BY_DEFAULT = {"print_exc", "print_exception", "print_stack", "StreamHandler"}


def _is_stderr(node: ast.AST) -> bool:
    """``sys.stderr`` or ``sys.__stderr__`` anywhere in the expression."""
    return any(
        isinstance(n, ast.Attribute)
        and n.attr in ("stderr", "__stderr__")
        and isinstance(n.value, ast.Name)
        and n.value.id == "sys"
        for n in ast.walk(node)
    )


def _writes_stderr(call: ast.Call) -> bool:
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    keywords = {k.arg: k.value for k in call.keywords}
    if "file" in keywords and _is_stderr(keywords["file"]):  # print(..., file=sys.stderr)
        return True
    if name in ("write", "writelines") and _is_stderr(func):  # sys.stderr.write(...)
        return True
    for word in ("err", "stderr"):  # typer.echo(err=True), Console(stderr=True)
        value = keywords.get(word)
        if isinstance(value, ast.Constant) and value.value is True:
            return True
    if name in TO_STDERR_BY_DEFAULT and not call.args and "file" not in keywords:
        return True
    if name == "write" and call.args and isinstance(call.args[0], ast.Constant):
        return call.args[0].value == 2  # os.write(2, ...)
    return False


def stderr_writes() -> list[tuple[str, str, int]]:
    """(file under profiler/, enclosing function or "", line) of every direct stderr write."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        name = path.relative_to(PACKAGE).as_posix()
        if name == SINK:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for function, node in _calls(tree, ""):
            if _writes_stderr(node):
                found.append((name, function, node.lineno))
    return found


def _calls(node: ast.AST, function: str):
    """(the outermost enclosing function's name, call) for every call under ``node``."""
    for child in ast.iter_child_nodes(node):
        inside = function
        if not function and isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
            inside = child.name
        if isinstance(child, ast.Call):
            yield inside, child
        yield from _calls(child, inside)


def test_the_package_writes_stderr_only_through_the_sink():
    writes = stderr_writes()
    outside = [f"profiler/{f}:{line} ({fn or 'module'})" for f, fn, line in writes]
    outside = [w for (f, fn, _), w in zip(writes, outside, strict=True) if (f, fn) not in ALLOWED]
    assert not outside, "stderr written outside profiler/cli/output.py:\n" + "\n".join(outside)
    # the allow-list names only writers that are there
    assert {(f, fn) for f, fn, _ in writes} >= set(ALLOWED)


def test_the_scan_sees_each_way_of_writing_stderr():
    source = """
import sys, typer, traceback, os
def f():
    print("x", file=sys.stderr)
    sys.stderr.write("x")
    typer.echo("x", err=True)
    Console(stderr=True)
    traceback.print_exc()
    os.write(2, b"x")
    print("x")
    Console(stderr=stderr)
    traceback.print_exc(file=buffer)
"""
    calls = [call for _, call in _calls(ast.parse(source), "")]
    assert [_writes_stderr(c) for c in calls] == [True] * 6 + [False] * 3


def _profile(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run(
        [sys.executable, str(ROOT / "profile.py"), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )


TINY = ["--model", "tests.tiny_models:conv_net", "--bs", "1", "--iters", "2"]
TINY += ["--timed-warmup", "0", "--active", "1", "--image-size", "16", "--no-cache"]


def test_quiet_commands_say_nothing_on_stderr(tmp_path):
    """A CPU run, a one-cell sweep of it, then summarize, compare and advise of the run: with
    -q, the results on stdout and nothing on stderr (the process's own fd 2, as a user sees)."""
    runs = tmp_path / "runs"
    done = _profile("-q", "run", *TINY, cwd=tmp_path)
    assert done.returncode == 0 and done.stdout, done.stderr[-3000:]
    assert done.stderr == ""
    (run,) = [p for p in runs.iterdir() if (p / "result.json").is_file()]
    done = _profile("sweep", "-q", "--backends", "pytorch_fp32", *TINY, cwd=tmp_path)
    assert done.returncode == 0 and "pytorch_fp32" in done.stdout, done.stderr[-3000:]
    assert done.stderr == ""
    for command in (
        ["summarize", str(run), "-q"],
        ["compare", str(run), str(FIXTURES / "h200" / "runs" / "pytorch_fp16_bs8"), "-q"],
        ["advise", str(run), "-q"],
    ):
        done = _profile(*command, cwd=tmp_path)
        assert done.returncode == 0 and done.stdout, (command, done.stderr[-3000:])
        assert done.stderr == "", command
