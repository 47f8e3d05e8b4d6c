import contextlib
import gc
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from profiler.runs import phases

ROOT = Path(__file__).resolve().parent.parent

# Each test caches in a folder of its own (private_cache, below), and with it the bytecode that
# profile.py keeps there when PYTHONDONTWRITEBYTECODE is set (profiler/collect/bytecode.py): every
# subprocess of the suite compiled torch again (a tiny run took 7.0 s instead of 3.2 s on a 2-core
# machine). The suite's subprocesses share one bytecode folder instead, kept between sessions and
# never beside the sources; tests/test_bytecode.py gives its subprocesses their own environment.
os.environ.setdefault(
    "PYTHONPYCACHEPREFIX",
    str(Path(__import__("tempfile").gettempdir()) / f"infer-profiler-tests-pycache-{os.getuid()}"),
)
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
# ... and so does this process (each xdist worker): the test modules' rewritten asserts and the
# project's modules were compiled again in every worker of every session (12.9 s of CPU to collect
# the suite, 6.0 s once kept)
if sys.dont_write_bytecode and sys.pycache_prefix is None:
    sys.pycache_prefix = os.environ["PYTHONPYCACHEPREFIX"]
    sys.dont_write_bytecode = False
FIXTURES = ROOT / "tests" / "fixtures"
#: the scripts, and their library scripts/_lib, import by name as `python scripts/<name>.py` has
#: them (the tests that check a script load it from here)
SCRIPTS = ROOT / "scripts"
if str(SCRIPTS) not in sys.path:
    sys.path.append(str(SCRIPTS))
TB_PLUGIN = FIXTURES / "kineto_tb_plugin"
V100_TRACE = TB_PLUGIN / "worker0.1623143089861.pt.trace.json.gz"
GOLDEN_INPUT = TB_PLUGIN / "gpu_metrics_input.json"
GOLDEN_EXPECTED = TB_PLUGIN / "gpu_metrics_expected.json"
PLUGIN_REFERENCE = TB_PLUGIN / "plugin_reference.json"


class CliResult:
    def __init__(self, code: int, stdout: str, stderr: str) -> None:
        self.code, self.stdout, self.stderr = code, stdout, stderr

    def __repr__(self) -> str:
        return f"CliResult(code={self.code}, stderr={self.stderr!r})"


@pytest.fixture(autouse=True)
def private_cache(tmp_path_factory, monkeypatch):
    """Each test's runs cache engines, FP32 references and FLOP counts in a folder of its own
    (never in the user's ~/.cache, never shared between tests), and keep noise floors and peaks
    beside it (``noise/`` and ``peaks/`` are the cache's siblings): a floor one test measured
    is never another's."""
    folder = tmp_path_factory.mktemp("cache") / "engines"
    folder.mkdir()
    monkeypatch.setenv("INFER_PROFILER_CACHE", str(folder))
    # a test sees the width a pipe gets (PIPE_WIDTH) unless it sets COLUMNS itself: pytest-xdist
    # sets COLUMNS to the terminal's width in its workers (80 on CI), which narrows every table
    monkeypatch.delenv("COLUMNS", raising=False)
    # the imports phase is measured from where profile.py or a sweep worker started the
    # process: a test that ran either in this process must not leave its mark to the next
    monkeypatch.setattr(phases, "process_mark", None)
    return folder


def invoke(*args: str) -> CliResult:
    """The CLI in this process, from the current folder (an exception that escapes it is
    raised)."""
    from profiler.cli.app import app

    result = CliRunner().invoke(app, list(args))
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return CliResult(result.exit_code, result.stdout, result.stderr)


@pytest.fixture
def cli(tmp_path, monkeypatch):
    """Invoke the CLI in-process from a scratch folder (runs/ and tb_logs/ land there)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(ROOT))
    return invoke


def invoke_in(folder: Path, *args: str) -> CliResult:
    """For a module's fixture, which cannot have the cli fixture: the CLI in this process from
    ``folder``, caching under ``folder``/cache, as the cli fixture and private_cache set it up."""
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(folder)
        patch.syspath_prepend(str(ROOT))
        patch.setenv("INFER_PROFILER_CACHE", str(folder / "cache"))
        patch.delenv("COLUMNS", raising=False)
        patch.setattr(phases, "process_mark", None)
        return invoke(*args)


def link_kept_bytecode(folder: Path) -> None:
    """Into ``folder`` (a cache's pycache, empty), the bytecode the suite's processes keep (above),
    as hard links, but torch.nn.modules': a run that keeps its bytecode in ``folder`` has those
    to write (compiling all of torch again took 5-12 s of CPU). What cannot be linked (none kept
    yet, another file system) the run compiles, as it would have."""

    def but_torch_nn_modules(where: str, names: list[str]) -> list[str]:
        return ["modules"] if Path(where).as_posix().endswith("/torch/nn") else []

    with contextlib.suppress(OSError):
        shutil.copytree(
            os.environ["PYTHONPYCACHEPREFIX"],
            folder,
            copy_function=os.link,
            ignore=but_torch_nn_modules,
            dirs_exist_ok=True,
        )
    assert not any(folder.rglob("torch/nn/modules/*.pyc"))


def default_signals() -> None:
    """In a child the suite starts, before it runs (``preexec_fn``): SIGINT, SIGTERM and SIGHUP
    at their default, whatever this runner was started with. A runner started in the background
    (``cmd &`` in a script) ignores SIGINT, one under ``nohup`` SIGHUP, and an ignored signal
    stays ignored across exec: a test that stops a child with it would test nothing. Every
    ``subprocess.Popen`` of the suite passes it (tests/test_hostile_round5_startup.py checks)."""
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, signal.SIG_DFL)


def run_python(*args: str, cwd: Path = ROOT, timeout: float = 600) -> subprocess.CompletedProcess:
    """A fresh interpreter, as a user would start one, from the repository root by default."""
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    return subprocess.run(
        [sys.executable, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env
    )


@pytest.fixture(scope="session")
def v100_summary():
    from profiler.trace.summary import summarize

    return summarize(V100_TRACE)


def stop_sweep_when(
    args: list[str],
    cwd: Path,
    name: str,
    ready,
    sig: int,
    env: dict | None = None,
    wait_s: float = 120,
    stop_s: float = 60,
) -> tuple[int, str, dict]:
    """Start `profile.py sweep --name NAME ARGS` in ``cwd``, send ``sig`` once ``ready(cells)``
    holds for the manifest's cells, and return (exit status, stderr, the cells afterwards)."""
    import json
    import time

    if env is None:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    process = subprocess.Popen(
        [sys.executable, str(ROOT / "profile.py"), "sweep", "--name", name, *args],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        preexec_fn=default_signals,
    )
    manifest = Path(cwd) / "runs" / name / "sweep.json"

    def cells() -> dict:
        try:
            return json.loads(manifest.read_text())["cells"]
        except (OSError, ValueError):
            return {}

    try:
        deadline = time.monotonic() + wait_s
        while not ready(cells()):
            if time.monotonic() > deadline or process.poll() is not None:
                pytest.fail(f"sweep {name} never got ready for the signal")
            time.sleep(0.05)
        process.send_signal(sig)
        _, stderr = process.communicate(timeout=stop_s)
    finally:
        if process.poll() is None:
            process.kill()
    return process.returncode, stderr, cells()


def pytest_collection_finish(session):
    """What collecting imported (torch, its libraries, every test module: millions of objects,
    alive until the process ends) is left out of the garbage collector's full passes, which
    otherwise walked all of it again, each taking about 0.2 s of CPU in a test worker."""
    gc.freeze()
