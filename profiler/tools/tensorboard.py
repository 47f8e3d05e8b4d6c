"""Start TensorBoard with the PyTorch profiler plugin (torch-tb-profiler) as a child process.

One helper serves both the ``tensorboard`` command and the test that talks to a real server:
``start`` checks the port, launches ``python -m tensorboard.main`` (an argument list, no shell),
and ``stop`` ends exactly that process (and the loader processes it started, which share its
process group) by its PID.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from profiler import signals, units
from profiler.errors import UserError
from profiler.notices import Say

LOOPBACK = "127.0.0.1"
ALL_INTERFACES = "0.0.0.0"
PLUGIN_ROUTE = "/data/plugin/pytorch_profiler"


def free_port(host: str = LOOPBACK) -> int:
    """A port nobody listens on right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def port_in_use(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return True
    return False


def check_installed() -> None:
    for module, package in (
        ("tensorboard", "tensorboard"),
        ("torch_tb_profiler", "torch-tb-profiler"),
    ):
        if importlib.util.find_spec(module) is None:
            raise UserError(
                f"{package} is not installed in this Python ({sys.executable}): "
                f"pip install {package}"
            )


def command(logdir: Path, port: int, bind_all: bool = False) -> list[str]:
    """The TensorBoard command line as a list. ``--load_fast=false`` keeps it one Python
    process (no Rust data server beside it), which is all the profiler plugin needs."""
    where = ["--bind_all"] if bind_all else ["--host", LOOPBACK]
    return [
        sys.executable,
        "-m",
        "tensorboard.main",
        "--logdir",
        str(logdir),
        *where,
        "--port",
        str(port),
        "--load_fast",
        "false",
    ]


@dataclass
class Server:
    process: subprocess.Popen
    port: int
    host: str
    logdir: Path

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def url(self) -> str:
        shown = LOOPBACK if self.host == ALL_INTERFACES else self.host
        return f"http://{shown}:{self.port}/#pytorch_profiler"

    @property
    def base(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    def get_json(self, route: str, timeout: float = 30.0):
        """GET a plugin route (``/runs``, ``/overview?run=...``) and decode its JSON."""
        with urllib.request.urlopen(self.base + PLUGIN_ROUTE + route, timeout=timeout) as reply:
            data = reply.read()
            if reply.headers.get("Content-Encoding") == "gzip":
                import gzip

                data = gzip.decompress(data)
        return json.loads(data)


def start(
    logdir: Path, port: int | None = None, bind_all: bool = False, output: IO | None = None
) -> Server:
    """Start TensorBoard on ``port`` (or a free one); one-line errors for a missing logdir, a
    missing package or a port in use. ``output`` receives the server's stdout and stderr (None:
    they go to this process's)."""
    logdir = Path(logdir)
    if not logdir.is_dir():
        raise UserError(
            f"no such folder: {logdir} (give --logdir, e.g. tb_logs written by `profile.py run`)"
        )
    check_installed()
    host = ALL_INTERFACES if bind_all else LOOPBACK
    if port is None:
        port = free_port(host)
    elif not 0 < port < 65536:
        raise UserError(f"--port must be between 1 and 65535 (got {port})")
    elif port_in_use(host, port):
        raise UserError(
            f"port {port} on {host} is in use: choose another --port, or leave it "
            "out to use a free one"
        )
    # its own process group: a Ctrl-C in the terminal reaches only us, and we forward it; the
    # plugin's loader processes share the group, so stop() can end them with the server
    process = subprocess.Popen(
        command(logdir, port, bind_all),
        stdin=subprocess.DEVNULL,
        stdout=output,
        stderr=subprocess.STDOUT if output else None,
        start_new_session=True,
        preexec_fn=_end_with_parent,
    )
    return Server(process=process, port=port, host=host, logdir=logdir)


def _end_with_parent() -> None:
    """In the server before it starts: SIGTERM it when this process dies, even by SIGKILL, so
    no server is ever left listening without its launcher."""
    signals.end_with_parent(signal.SIGTERM)


def wait_until_serving(server: Server, timeout: float = 60.0) -> None:
    """Poll the plugin's ``/runs`` route until it answers; fail if the server exits first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise UserError(
                f"TensorBoard exited with status {server.process.returncode} before serving"
            )
        try:
            server.get_json("/runs", timeout=2.0)
            return
        except (urllib.error.URLError, ConnectionError, OSError, ValueError):
            time.sleep(0.3)
    raise UserError(
        f"TensorBoard did not answer on port {server.port} within "
        f"{units.time(timeout, 's', decimals=0, thousands=False)}"
    )


def wait_for_runs(server: Server, names: set[str], timeout: float = 90.0) -> dict:
    """Poll ``/runs`` until every name in ``names`` is loaded and nothing is loading."""
    deadline = time.monotonic() + timeout
    last: dict = {}
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise RuntimeError(f"TensorBoard exited with status {server.process.returncode}")
        try:
            last = server.get_json("/runs", timeout=5.0)
        except (urllib.error.URLError, ConnectionError, OSError, ValueError):
            last = {}
        if names <= set(last.get("runs", [])) and not last.get("loading", True):
            return last
        time.sleep(0.5)
    raise TimeoutError(
        f"runs {sorted(names)} not loaded within "
        f"{units.time(timeout, 's', decimals=0, thousands=False)}; "
        f"last answer {last}"
    )


def stop(server: Server, grace: float = 1.0) -> int:
    """End the server by its PID: SIGTERM (it does not stop on SIGINT), SIGKILL after ``grace``
    seconds; then whatever is left of its process group (plugin loader processes)."""
    process = server.process
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        if process.poll() is not None:
            break
        try:
            os.kill(process.pid, sig)
        except ProcessLookupError:
            break
        try:
            process.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            continue
    try:  # the group id is the server's PID (start_new_session)
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    return process.wait()


#: signals that stop the ``tensorboard`` command the way Ctrl-C does (kill, timeout, systemd,
#: CI cancellation, a closed terminal)
STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


class Stopped(KeyboardInterrupt):
    """SIGTERM or SIGHUP while serving."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _raise_stopped(signum: int, frame) -> None:
    raise Stopped(signum)


@dataclass
class Served:
    """How the ``tensorboard`` command ended: ``exit_code`` 0 for Ctrl-C, 128 + the signal's
    number for SIGTERM/SIGHUP; ``server_status`` when the server ended on its own."""

    exit_code: int
    server_status: int | None = None
    log: Path | None = None


def serve(
    logdir: Path, port: int | None = None, bind_all: bool = False, echo: Say = print
) -> Served:
    """The ``tensorboard`` command: start, print the URL, wait; Ctrl-C, SIGTERM and SIGHUP stop
    the server (within about a second). Its own output goes to a log file, so its shutdown
    noise never reaches the terminal."""
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, *STOP_SIGNALS)}
    for sig in STOP_SIGNALS:
        signal.signal(sig, _raise_stopped)
    server = log = None
    served = Served(exit_code=0)
    try:
        log_handle, log_name = tempfile.mkstemp(prefix="tensorboard-", suffix=".log")
        log = Path(log_name)
        with os.fdopen(log_handle, "w") as output:
            server = start(logdir, port=port, bind_all=bind_all, output=output)
        echo(
            f"TensorBoard (PyTorch profiler plugin) on {server.url}  logdir {logdir}"
            + ("  [all interfaces]" if bind_all else "")
            + "; Ctrl-C stops it"
        )
        status = server.process.wait()
        served = Served(exit_code=0 if status == 0 else 1, server_status=status, log=log)
    except Stopped as stopped:
        served = Served(exit_code=128 + stopped.signum)
    except KeyboardInterrupt:
        served = Served(exit_code=0)
    finally:
        for sig in previous:  # a second signal must not cut the cleanup short
            signal.signal(sig, signal.SIG_IGN)
        try:
            if server is not None:
                stop(server)
            if log is not None and served.log is None:  # kept only when the server failed
                log.unlink(missing_ok=True)
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
    return served
