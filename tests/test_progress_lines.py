"""Nothing silent for long (issue 48 point 4): a line on stderr before every phase of a run that
can take seconds (loading torch; the FLOP count, after the run's first line; prepare, the first
call, warm-up, the timed window, the profile, the numeric check), before `backends` probes the
libraries and before `compare --processes` loads torch; and a backend that cannot run on a
machine without a GPU is refused before torch is loaded."""

import os
import re
import subprocess
import sys

import pytest
from rich.console import Console

from .conftest import ROOT
from .test_cli_errors import TINY, assert_nothing_written, assert_one_line_error


def test_a_phase_is_a_line_off_a_terminal_and_nothing_when_quiet():
    from profiler.collect.window import Progress

    console = Console(record=True, width=100, force_terminal=False)
    progress = Progress(False, console)
    with progress.phase("prepare (the backend compiles or builds here)"):
        pass
    with progress.bar("timed", 5) as tick:
        tick()
    assert console.export_text().splitlines() == [
        "  prepare (the backend compiles or builds here) ...",
        "  timed ...",
    ]
    quiet = Console(record=True, width=100, force_terminal=False)
    with Progress(True, quiet).phase("prepare"):
        pass
    assert quiet.export_text() == ""


def test_a_run_says_each_phase_before_it_starts(cli):
    done = cli("run", *TINY)
    assert done.code == 0, done.stderr
    lines = done.stderr.splitlines()
    order = [
        r"tests\.tiny_models:conv_net pytorch_fp32 bs8 on CPU$",
        r"  counting FLOPs \.\.\.$",
        r"  prepare \(the backend compiles or builds here\) \.\.\.$",
        r"  first call \.\.\.$",
        r"  prepare [\d.]+ s, first call [\d.]+ s$",
        r"  warmup \.\.\.$",
        r"  timed \.\.\.$",
        r"  timed \d+ iterations",
        r"  profile \.\.\.$",
        r"  numerics \(the output against the FP32 eager reference\) \.\.\.$",
    ]
    at = [next(i for i, line in enumerate(lines) if re.match(s, line)) for s in order]
    assert at == sorted(set(at)), done.stderr


def test_no_gpu_here_is_decided_without_torch(tmp_path, monkeypatch):
    from profiler.commands import no_gpu_here

    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    present = tmp_path / "nvidiactl"
    present.write_text("")
    assert no_gpu_here((str(present),)) is None
    if sys.platform.startswith("linux"):
        assert "no GPU driver" in no_gpu_here((str(tmp_path / "none"),))
    for hidden in ("", "-1"):
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", hidden)
        assert "hides every GPU" in no_gpu_here((str(present),))


@pytest.mark.parametrize(
    "backend, why",
    [("pytorch_fp16", "needs a CUDA GPU"), ("ttrt_fp16", "torch-tensorrt")],
)
def test_a_cuda_backend_on_a_machine_without_a_gpu_is_refused_before_torch_loads(backend, why):
    """In a fresh interpreter: one error line, exit 2, and torch never imported (importing it
    took 20 s on a first start of a 2-core machine); a missing package is named first, as the
    harness names it (TensorRT's, where it is not installed)."""
    from profiler.collect.backends import get

    if why == "torch-tensorrt" and get(backend).missing() is None:
        why = "needs a CUDA GPU"
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")
    env.pop("PYTHONPATH", None)
    probe = (
        "import sys\n"
        "from profiler.cli.app import main\n"
        f"code = main(['run', '--backend', {backend!r}, '--bs', '1'])\n"
        "print('torch' in sys.modules, code)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, env=env
    )
    assert done.stdout.split() == ["False", "2"], done.stderr
    assert done.stderr.startswith(f"error: backend {backend} cannot run here: ")
    assert why in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_the_refusal_is_one_line_and_writes_nothing(cli, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    done = cli("run", "--backend", "inductor_fp16", *TINY)
    assert_one_line_error(done, "inductor_fp16", "needs a CUDA GPU", "hides every GPU")
    assert_nothing_written()


def test_loading_torch_is_said_only_where_torch_is_not_loaded_yet():
    from profiler.commands import loading_line

    assert "torch" in sys.modules and loading_line("and the harness") is None
    probe = (
        "import sys\n"
        "from profiler.commands import loading_line\n"
        "print(loading_line('and the harness'))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True)
    assert done.stdout.strip() == "loading torch and the harness ...", done.stderr


def test_backends_says_what_it_probes_before_it_probes(cli):
    done = cli("backends")
    assert done.code == 0, done.stderr
    assert "checking each backend's libraries" in done.stderr
    assert cli("backends", "--json").stderr == ""
