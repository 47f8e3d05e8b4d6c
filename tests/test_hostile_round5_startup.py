"""Hostile testing, round 5 (issue 47 points 1, 3 and 5): what makes a first run fast never
outlives the command, never writes through a link, and never changes what the model meets.

The bytecode precompile (profiler.collect.bytecode) opens its lock with O_NOFOLLOW and only as a
regular file of its own (R5-1); it ends with the command that started it, on every way out
(R5-2) and on SIGTERM and SIGHUP from the start of main(), which now print one line and exit
143/129 (R5-3). The FLOP count runs on a copy of the model on the meta device, under torch's
own FlopCounterMode, with no stand-in for torch._dynamo: a model that compiles lazily is
compiled (R5-4), one that asks torch._dynamo.is_compiling() is counted (R5-5). The suite's own
children take SIGINT, SIGTERM and SIGHUP at their default whatever the runner ignores (R5-17).
Reproductions: ../shared/reliability/defects-round5.md."""

from __future__ import annotations

import ast
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .conftest import ROOT, default_signals
from .test_hostile_round4_signals import Family

PROFILE = str(ROOT / "profile.py")
FAST = ["--iters", "3", "--timed-warmup", "0", "--active", "1"]


def _compiling(argv: list[str]) -> bool:
    return "profiler.collect.bytecode" in argv


def _fresh_env(tmp_path: Path) -> dict:
    """A machine whose environment writes no bytecode and whose cache is empty: the precompile
    starts (profiler.collect.bytecode)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "PYTHONPYCACHEPREFIX", "INFER_PROFILER_PYCACHE")
    }
    env.update(
        PYTHONDONTWRITEBYTECODE="1",
        INFER_PROFILER_CACHE=str(tmp_path / "cache"),
        CUDA_VISIBLE_DEVICES="",
        COLUMNS="200",
    )
    return env


def _watched(args: list[str], tmp_path: Path) -> tuple[subprocess.Popen, Family]:
    process = subprocess.Popen(
        [sys.executable, PROFILE, *args],
        cwd=tmp_path,
        env=_fresh_env(tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=default_signals,
    )
    return process, Family(process.pid)


def _ended(process: subprocess.Popen, family: Family, signum: int | None = None):
    """The command's exit status, its stderr and what it left running; with ``signum``, sent
    once the compile runs. Whatever is left is killed afterwards."""
    try:
        if signum is not None:
            deadline = time.monotonic() + 120
            while not family.started(_compiling):
                if process.poll() is not None:
                    pytest.fail(f"exited {process.returncode} before the compile started")
                assert time.monotonic() < deadline, "the compile never started"
                time.sleep(0.02)
            process.send_signal(signum)
        _, stderr = process.communicate(timeout=300)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        family.done.set()
        family.thread.join()
    left = family.alive()
    family.kill_all()
    return process.returncode, stderr, left


# ---- R5-1: the lock is never opened through a link --------------------------------------------


def _planted_symlink(lock: Path, victim: Path) -> None:
    lock.symlink_to(victim)


def _planted_hard_link(lock: Path, victim: Path) -> None:
    os.link(victim, lock)


@pytest.mark.parametrize("plant", [_planted_symlink, _planted_hard_link], ids=["symlink", "hard"])
def test_the_precompile_never_writes_through_a_link_at_its_lock(tmp_path, monkeypatch, plant):
    """R5-1: the lock was opened with open(..., "a"), which follows a symlink, then truncated
    and given the pid: a file the link named lost its content."""
    from profiler.collect import bytecode

    prefix = tmp_path / "cache" / "pycache"
    prefix.mkdir(parents=True)
    victim = tmp_path / "victim.txt"
    victim.write_text("precious notes\n")
    plant(prefix / bytecode.LOCK, victim)
    source = tmp_path / "src"
    source.mkdir()
    (source / "m1.py").write_text("X = 1\n")
    monkeypatch.setattr(bytecode, "folders", lambda: [source])
    monkeypatch.setattr(sys, "pycache_prefix", str(prefix))
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    bytecode._main(str(prefix))
    assert victim.read_text() == "precious notes\n"
    assert not (prefix / bytecode.DONE_MARKER).exists()  # skipped: nothing compiled
    bytecode.stop_precompile()  # reading the planted lock: nothing happens either
    assert victim.read_text() == "precious notes\n"


def test_the_precompile_skips_a_pycache_folder_that_is_a_symlink(tmp_path, monkeypatch):
    from profiler.collect import bytecode

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "pycache").symlink_to(elsewhere)
    monkeypatch.setenv("INFER_PROFILER_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    monkeypatch.setattr(sys, "pycache_prefix", None)
    assert bytecode.keep_bytecode({}) is None and sys.pycache_prefix is None
    monkeypatch.setattr(sys, "pycache_prefix", str(tmp_path / "cache" / "pycache"))
    assert bytecode.precompile({}) is False
    assert list(elsewhere.iterdir()) == []


# ---- R5-2, R5-3: the compile ends with the command ----------------------------------------------


def test_a_run_that_fails_before_its_window_leaves_no_compile_running(tmp_path):
    """R5-2: the compile was stopped only before the timed windows, so a run that failed
    earlier (a model that cannot be imported) left it running after its exit."""
    process, family = _watched(["run", "--model", "nosuch.module:fn", "--bs", "1"], tmp_path)
    code, stderr, left = _ended(process, family)
    assert code == 2 and "cannot import" in stderr, stderr
    assert family.started(_compiling), "the compile never started: nothing was tested"
    assert left == [], f"left running after the run ended: {left}"


def test_a_sweep_whose_cells_fail_leaves_no_compile_running(tmp_path):
    """R5-2: the sweep worker started the compile and never stopped it when no cell reached a
    timed window."""
    args = ["sweep", "--model", "tests.tiny_models:builder_raises", "--backends", "pytorch_fp32"]
    process, family = _watched([*args, "--bs", "1,2", *FAST, "--name", "sb"], tmp_path)
    code, stderr, left = _ended(process, family)
    assert code == 1, stderr
    assert family.started(_compiling), "the compile never started: nothing was tested"
    assert left == [], f"left running after the sweep ended: {left}"


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=["TERM", "HUP"])
def test_a_signal_during_the_imports_is_one_line_and_ends_the_compile(tmp_path, signum):
    """R5-3: SIGTERM and SIGHUP were handled only once torch was imported: before that, the
    run died of the signal without a line, and the compile ran on."""
    args = ["run", "--model", "tests.tiny_models:conv_net", "--bs", "1", *FAST]
    process, family = _watched(args, tmp_path)
    code, stderr, left = _ended(process, family, signum)
    assert code == 128 + signum, stderr
    lines = stderr.strip().splitlines()
    said = [line for line in lines if line.startswith("interrupted")]
    assert len(said) == 1 and lines[-1] == said[0], stderr  # one line, the last
    assert said[0].startswith(f"interrupted by {signal.Signals(signum).name}"), said
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr, stderr
    assert left == [], f"left running after the run ended: {left}"
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_a_child_bound_to_its_parent_ends_when_the_parent_is_killed():
    """The backstop for a command killed where no code runs (SIGKILL, the OOM killer): the
    compile asks the kernel to end it with its parent."""
    parent = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import subprocess, sys, time\n"
            "child = subprocess.Popen([sys.executable, '-c', "
            "'import os, sys, time; sys.path.insert(0, sys.argv[1]); "
            "from profiler.collect import bytecode; bytecode._bind_to_parent(os.getppid()); "
            "print(os.getpid(), flush=True); time.sleep(120)', sys.argv[1]])\n"
            "time.sleep(120)\n",
            str(ROOT),
        ],
        stdout=subprocess.PIPE,
        text=True,
        preexec_fn=default_signals,
    )
    try:
        child = int(parent.stdout.readline())
        parent.kill()
        parent.wait()
        deadline = time.monotonic() + 30
        while Path(f"/proc/{child}").exists() and "Z" not in _state(child):
            assert time.monotonic() < deadline, "the child outlived its parent"
            time.sleep(0.05)
    finally:
        if parent.poll() is None:
            parent.kill()


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "Z"


# ---- R5-4, R5-5: the FLOP count is not what the model meets first ---------------------------

MODELS = '''
import torch
from pathlib import Path

HERE = Path(__file__).resolve().parent


class Lazy(torch.nn.Module):
    """Compiles itself on its first call; falls back to eager when that fails."""

    def __init__(self):
        super().__init__()
        self.inner = torch.nn.Linear(16, 16)
        self.fn = None

    def forward(self, x):
        if self.fn is None:
            try:
                compiled = torch.compile(self.inner, backend="eager")
                y = compiled(x)
                self.fn, mode = compiled, "compiled"
            except Exception as error:
                self.fn, mode = self.inner, f"eager-fallback {type(error).__name__}: {error}"
                y = self.fn(x)
            with open(HERE / "MODE.txt", "a") as f:
                f.write(mode + "\\n")
            return y
        return self.fn(x)


def lazy_compile(batch_size=2):
    return Lazy(), torch.randn(batch_size, 16)


class AsksDynamo(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(64, 64)

    def forward(self, x):
        import torch._dynamo as dynamo

        with open(HERE / "DYNAMO.txt", "a") as f:
            f.write(f"{dynamo.__file__}\\n")
        if torch._dynamo.is_compiling():
            x = x * 1.0
        return self.linear(x)


def dyn_is_compiling(batch_size=2):
    return AsksDynamo(), torch.randn(batch_size, 64)
'''


@pytest.fixture(scope="module")
def mymods(tmp_path_factory) -> Path:
    """A folder holding the package r5mods with the two models of R5-4 and R5-5."""
    root = tmp_path_factory.mktemp("mymods")
    (root / "r5mods").mkdir()
    (root / "r5mods" / "__init__.py").write_text(MODELS)
    return root


def _run_fresh(root: Path, model: str, name: str) -> subprocess.CompletedProcess:
    """`run` of ``model`` in a fresh interpreter (torch._dynamo not imported yet, as a user's
    first run), from ``root``."""
    env = dict(os.environ, PYTHONPATH=str(root))  # (the package of the user's, importable)
    env.update(CUDA_VISIBLE_DEVICES="", INFER_PROFILER_CACHE=str(root / "cache"))
    return subprocess.run(
        [sys.executable, PROFILE, "run", "--model", model, *FAST, "--bs", "2", "--name", name],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_a_model_that_compiles_lazily_is_compiled(mymods):
    """R5-4: the count was the model's first forward, with a stand-in torch._dynamo in
    sys.modules: torch.compile failed there ('torch._dynamo' is not a package) and the model
    fell back to eager for the whole run, silently."""
    done = _run_fresh(mymods, "r5mods:lazy_compile", "lazy")
    assert done.returncode == 0, done.stderr
    modes = (mymods / "r5mods" / "MODE.txt").read_text().splitlines()
    assert modes and all(mode == "compiled" for mode in modes), modes


def test_a_model_that_asks_dynamo_is_counted_and_meets_the_real_module(mymods):
    """R5-5: torch._dynamo.is_compiling() raised AttributeError under the stand-in: the run
    had no FLOPs and no roofline; a module kept the stand-in (no __file__) for the whole run."""
    done = _run_fresh(mymods, "r5mods:dyn_is_compiling", "d")
    assert done.returncode == 0, done.stderr
    result = json.loads((mymods / "runs" / "pytorch_fp32_bs2_d" / "result.json").read_text())
    counted = result["roofline_inputs"]
    assert "error" not in counted, counted
    assert counted["flops_per_batch"] == 2 * 2 * 64 * 64  # the Linear: 2 per multiply-add
    files = set((mymods / "r5mods" / "DYNAMO.txt").read_text().splitlines())
    assert "None" not in files and all(f.endswith("__init__.py") for f in files), files


def test_the_count_leaves_the_model_as_it_was():
    """The count runs on a copy on the meta device: the model's weights, buffers and what its
    forward keeps on the module are untouched, and its first real call is its own."""
    import torch

    from profiler.collect import flops

    class Keeps(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(8, 8)
            self.calls = 0

        def forward(self, x):
            self.calls += 1
            return self.linear(x)

    model = Keeps()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    counted = flops.count(model, (torch.randn(2, 8),))
    assert counted["flops_per_batch"] == 2 * 2 * 8 * 8 and "meta" in counted["how"]
    assert model.calls == 0
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert all(p.device.type == "cpu" for p in model.parameters())


def test_the_meta_count_is_the_cpu_count_and_torch_is_as_torch_ships():
    """A built-in model counted on the meta device and on CPU copies: the same figures; the
    torch._dynamo the count imported is torch's own (what tests/test_flops_without_dynamo.py
    checked of the stand-in, now of torch as it is)."""
    code = (
        "import sys, torch\n"
        "from profiler.collect import flops, models\n"
        "from profiler.runs.config import RunConfig\n"
        "model, inputs = models.build(RunConfig(model='resnet18', batch_size=2, image_size=32))\n"
        "meta, cpu = flops._counted(model, inputs, 'meta'), flops._counted(model, inputs, 'cpu')\n"
        "print(meta == cpu, meta[0] > 0, sys.modules['torch._dynamo'].__file__ is not None)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, env=env
    )
    assert done.stdout.split() == ["True", "True", "True"], done.stderr


def test_a_command_that_ends_stops_only_its_own_compilation(tmp_path, monkeypatch):
    """main()'s way out stops the compile this process started, never another's (a sweep
    worker's): that one is stopped only before a timed window."""
    from profiler.collect import bytecode

    prefix = tmp_path / "pycache"
    prefix.mkdir()
    monkeypatch.setattr(sys, "pycache_prefix", str(prefix))
    other = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)", bytecode.MODULE, str(prefix)],
        start_new_session=True,
        preexec_fn=default_signals,
    )
    try:
        (prefix / bytecode.LOCK).write_text(str(other.pid))
        cmdline = Path(f"/proc/{other.pid}/cmdline")
        while bytecode.MODULE.encode() not in cmdline.read_bytes():  # until it has exec'd
            time.sleep(0.02)
        bytecode.stop_precompile(others=False)
        assert other.poll() is None
    finally:
        other.kill()
        other.wait()


def test_the_count_has_no_stand_in_for_torch_dynamo():
    """The stand-in rested on torch-private code (torch._disable_dynamo); it is gone."""
    from profiler.collect import flops

    assert not hasattr(flops, "_without_dynamo")
    assert "sys.modules" not in Path(flops.__file__).read_text()


# ---- R5-17: the suite's children take the signals it sends ----------------------------------


def test_a_child_of_the_suite_takes_sigint_when_the_runner_ignores_it():
    """R5-17: a runner started with `&` ignores SIGINT, and so did every child it started: a
    Ctrl-C test then tested nothing. default_signals puts the three back in the child."""
    code = (
        "import signal as s; print(s.getsignal(2) is s.default_int_handler, "
        "s.getsignal(15) == s.SIG_DFL, s.getsignal(1) == s.SIG_DFL)"
    )
    previous = {s: signal.signal(s, signal.SIG_IGN) for s in (2, 15, 1)}
    try:
        child = subprocess.Popen(
            [sys.executable, "-c", code],
            stdout=subprocess.PIPE,
            text=True,
            preexec_fn=default_signals,
        )
        out, _ = child.communicate(timeout=60)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    assert out.split() == ["True", "True", "True"]


def test_every_child_the_suite_starts_gets_the_signals_at_their_default():
    """R5-17: every subprocess.Popen of the tests passes preexec_fn (default_signals)."""
    missing = []
    for path in sorted((ROOT / "tests").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "Popen"
                and not any(k.arg == "preexec_fn" for k in node.keywords)
            ):
                missing.append(f"{path.name}:{node.lineno}")
    assert missing == []
