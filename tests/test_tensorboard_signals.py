"""`profile.py tensorboard` stopped by Ctrl-C, SIGTERM or SIGHUP (real processes): it ends
promptly, the TensorBoard server and its port are gone, and no traceback reaches the terminal."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from profiler.tools import tensorboard as tb

from .conftest import ROOT, default_signals


def server_pids(port: int) -> list[int]:
    """PIDs of TensorBoard processes serving ``port`` (from /proc, no extra package)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"tensorboard.main" in cmdline and str(port).encode() in cmdline:
            pids.append(int(entry.name))
    return pids


def wait_for(condition, limit: float) -> bool:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return condition()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize(
    "sig, code",
    [(signal.SIGINT, 0), (signal.SIGTERM, 143), (signal.SIGHUP, 129)],
    ids=["ctrl-c", "sigterm", "sighup"],
)
def test_signal_stops_tensorboard_and_its_server(tmp_path, sig, code):
    pytest.importorskip("torch_tb_profiler")
    port = tb.free_port()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    launcher = subprocess.Popen(
        [
            sys.executable,
            "profile.py",
            "tensorboard",
            "--logdir",
            str(tmp_path),
            "--port",
            str(port),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        preexec_fn=default_signals,
    )
    try:
        assert wait_for(lambda: tb.port_in_use(tb.LOOPBACK, port), 60), "never listened"
        assert server_pids(port)
        launcher.send_signal(sig)
        # the stop is bounded: SIGTERM to the server, SIGKILL one second later
        out, err = launcher.communicate(timeout=10)
    finally:
        if launcher.poll() is None:
            launcher.kill()
            launcher.wait()
    assert launcher.returncode == code, err
    assert "Traceback" not in err and "Traceback" not in out
    assert len(err.strip().splitlines()) <= 1, err
    assert server_pids(port) == []
    assert not tb.port_in_use(tb.LOOPBACK, port)
    assert "http://127.0.0.1" in out


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG")
def test_server_ends_when_its_launcher_is_killed(tmp_path):
    """SIGKILL cannot be handled: the server is told by the kernel that its parent died."""
    pytest.importorskip("torch_tb_profiler")
    port = tb.free_port()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    launcher = subprocess.Popen(
        [
            sys.executable,
            "profile.py",
            "tensorboard",
            "--logdir",
            str(tmp_path),
            "--port",
            str(port),
        ],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
        preexec_fn=default_signals,
    )
    try:
        assert wait_for(lambda: tb.port_in_use(tb.LOOPBACK, port), 60), "never listened"
        launcher.kill()
        launcher.wait()
        assert wait_for(lambda: not server_pids(port), 15), server_pids(port)
    finally:
        for pid in server_pids(port):
            os.kill(pid, signal.SIGKILL)
