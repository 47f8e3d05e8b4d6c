"""Shared by the nsys and ncu launchers: finding a tool, running a command list with its output
both shown and logged, and the harness command line they wrap. Nothing here imports torch: the
harness runs as a child process, under the tool."""

from __future__ import annotations

import glob
import os
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from profiler import SOURCE_ROOT, signals
from profiler.errors import UserError
from profiler.runs.config import run_argv

if TYPE_CHECKING:
    from profiler.runs.config import RunConfig

ROOT = SOURCE_ROOT
PROFILE_PY = ROOT / "profile.py"


def locate(tool: str, env_var: str, known: Iterable[str]) -> str:
    """``$ENV_VAR``, then PATH, then known install locations (newest version first)."""
    from_env = os.environ.get(env_var)
    if from_env:
        if not (os.path.isfile(from_env) and os.access(from_env, os.X_OK)):
            raise UserError(f"{env_var}={from_env} is not an executable file")
        return from_env
    found = shutil.which(tool)
    if found:
        return found
    for pattern in known:
        matches = sorted(glob.glob(pattern), reverse=True)
        for match in matches:
            if os.access(match, os.X_OK):
                return match
    raise UserError(
        f"{tool} not found: put it on PATH or set {env_var} to its path "
        f"(looked in {', '.join(known)})"
    )


@dataclass
class Finished:
    returncode: int
    output: str  # stdout and stderr, interleaved

    @property
    def status(self) -> str:
        """ "exit status 3", or "killed by SIGKILL" for a tool a signal ended."""
        if self.returncode < 0:
            import signal

            try:
                return f"killed by {signal.Signals(-self.returncode).name}"
            except ValueError:
                return f"killed by signal {-self.returncode}"
        return f"exit status {self.returncode}"


#: seconds a tool's output may stay open after the tool exited normally (its children
#: finishing their writes) before they are ended
ORPHAN_GRACE_S = 10.0


def _start(command: list[str], env: dict | None) -> subprocess.Popen[str]:
    """The command in a process group of its own, its output (stderr with it) to read by
    line; a command that cannot start is one error line."""
    try:
        return signals.popen_child(
            command,
            stop=signal.SIGTERM,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            text=True,
            errors="replace",
            bufsize=1,
        )
    except OSError as error:
        raise UserError(f"cannot start {command[0]}: {error.strerror}") from None


def run_logged(
    command: list[str],
    log_path: Path,
    env: dict | None = None,
    echo: Callable[[str], object] | None = None,
) -> Finished:
    """Run an argument list (never a shell string); copy its output to a log file and each line
    to ``echo`` (the command's note: stderr; None: the log only).

    The tool runs in a process group of its own. When it ends by a signal (killed, crashed),
    what it started is ended with it: ncu's or nsys's profiled process, left without its tool,
    would otherwise hold the output open (and the GPU) for ever; after a normal exit its
    children get ``ORPHAN_GRACE_S`` to close the output. Ctrl-C, SIGTERM and SIGHUP (inside
    profiler.signals.as_interrupts) end the whole group (SIGTERM, a grace, SIGKILL); what it
    says from then on goes to the log only, so the stop is one line."""
    assert isinstance(command, list) and all(isinstance(a, str) for a in command), command
    log_path.parent.mkdir(parents=True, exist_ok=True)
    lines: list[str] = []
    stopping: list[bool] = []
    with open(log_path, "a", encoding="utf-8") as log:
        log.write("$ " + " ".join(command) + "\n")
        process = _start(command, env)

        def copy() -> None:
            assert process.stdout is not None  # stdout=PIPE
            for line in process.stdout:
                lines.append(line)
                try:
                    log.write(line)
                except ValueError:  # closed: the command stopped without waiting for us
                    return
                if echo is not None and not stopping:
                    echo(line.rstrip("\n"))

        reader = threading.Thread(target=copy, daemon=True)
        reader.start()
        try:
            process.wait()
            reader.join(timeout=0.0 if process.returncode < 0 else ORPHAN_GRACE_S)
            if reader.is_alive():  # something the tool started still holds its output
                _end_group(process.pid, signal.SIGKILL)
                reader.join(timeout=5.0)
        except KeyboardInterrupt:  # Ctrl-C; SIGTERM and SIGHUP in signals.as_interrupts()
            stopping.append(True)
            signals.stop_child(process, signal.SIGTERM)
            reader.join(timeout=5.0)  # the group is gone: its output ends
            raise
    return Finished(process.returncode, "".join(lines))


def _end_group(group: int, sig: int) -> None:
    try:
        os.killpg(group, sig)
    except (ProcessLookupError, PermissionError):
        pass


def harness_command(config: RunConfig) -> list[str]:
    """``python profile.py run ...`` as a list, with this Python, giving every option of
    ``config``."""
    return [sys.executable, str(PROFILE_PY), "run", *run_argv(config.options())]


def last_line_with(text: str, words: Iterable[str]) -> str | None:
    words = [w.lower() for w in words]
    for line in reversed(text.splitlines()):
        if any(w in line.lower() for w in words):
            return line.strip()
    return None
