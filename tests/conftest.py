import os
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
FIXTURES = ROOT / "tests" / "fixtures"
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
    (never in the user's ~/.cache, never shared between tests)."""
    folder = tmp_path_factory.mktemp("cache")
    monkeypatch.setenv("INFER_PROFILER_CACHE", str(folder))
    # a test sees the width a pipe gets (PIPE_WIDTH) unless it sets COLUMNS itself: pytest-xdist
    # sets COLUMNS to the terminal's width in its workers (80 on CI), which narrows every table
    monkeypatch.delenv("COLUMNS", raising=False)
    # the imports phase is measured from where profile.py or a sweep worker started the
    # process: a test that ran either in this process must not leave its mark to the next
    monkeypatch.setattr(phases, "process_mark", None)
    return folder


@pytest.fixture
def cli(tmp_path, monkeypatch):
    """Invoke the CLI in-process from a scratch folder (runs/ and tb_logs/ land there)."""
    from profiler.cli.app import app

    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(ROOT))

    def invoke(*args: str) -> CliResult:
        result = CliRunner().invoke(app, list(args))
        if result.exception and not isinstance(result.exception, SystemExit):
            raise result.exception
        return CliResult(result.exit_code, result.stdout, result.stderr)

    return invoke


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
