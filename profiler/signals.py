"""SIGTERM and SIGHUP end a command the way Ctrl-C does.

``kill``, ``timeout``, systemd, CI cancellation and a closed terminal send SIGTERM or SIGHUP,
not SIGINT. Inside ``as_interrupts()`` both raise ``Terminated``, a KeyboardInterrupt, so every
``except KeyboardInterrupt`` / ``finally`` path that Ctrl-C takes (staging folders removed, a
sweep's running cell stopped and recorded, its tables written) runs for them too; the CLI then
exits 128 + the signal's number (143 for SIGTERM, 129 for SIGHUP; Ctrl-C stays 130).

``deferred()`` holds these signals and Ctrl-C back for a few statements that must not be cut
in half (moving a finished run into place); one that arrives meanwhile is raised at its end.

The rule for every long command (run, sweep, compare --processes, noise, advise --try, ncu,
nsys): Ctrl-C, SIGTERM and SIGHUP stop the children it started (``run_child`` /
``stop_child``: the child's whole process group, a grace period to clean up, then SIGKILL; none
is left running), nothing half-written is kept, one line is printed and the exit status is 130,
143 or 129 (``interruptible`` for a command that has no clean-up of its own to report).
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import subprocess
import time
from collections.abc import Iterator

HANDLED = (signal.SIGTERM, signal.SIGHUP)
#: seconds a stopped child gets to end (a CLI child removes its staging folders) before SIGKILL
CHILD_GRACE_S = 10.0
#: in the environment of a CLI child whose output goes straight to the user (``ncu``'s first
#: run): when its parent stops it, the parent prints the one line, the child none
QUIET_STOP_ENV = "INFER_PROFILER_QUIET_STOP"
_pending: list[int] = []
_deferring = False


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP, raised where Ctrl-C would raise KeyboardInterrupt."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def exit_code(stop: BaseException) -> int:
    """The exit status for an interruption: 128 + the signal number (130 for Ctrl-C)."""
    return 128 + getattr(stop, "signum", signal.SIGINT)


def describe(stop: BaseException) -> str:
    """How the user stopped us, for messages: "Ctrl-C", "SIGTERM" or "SIGHUP" (or the reason
    a stop raised by the program itself carries as ``why``)."""
    why = getattr(stop, "why", None)
    if why:
        return why
    signum = getattr(stop, "signum", None)
    return "Ctrl-C" if signum is None else signal.Signals(signum).name


def _raise(signum: int, frame) -> None:
    if _deferring:
        _pending.append(signum)
        return
    if signum == signal.SIGINT:
        raise KeyboardInterrupt
    raise Terminated(signum)


def install() -> None:
    """SIGTERM and SIGHUP raise Terminated from now on (main thread only): the entry point's
    first instruction, before its imports, so a stop during them is one line and 143/129 too
    (``as_interrupts`` for a block). A signal this process was started ignoring stays
    ignored."""
    if not _main_thread():
        return
    for signum in HANDLED:
        if signal.getsignal(signum) is not signal.SIG_IGN:
            signal.signal(signum, _raise)


def _main_thread() -> bool:
    """Whether this is the main thread, the only one a handler can be set from."""
    import threading

    return threading.current_thread() is threading.main_thread()


@contextlib.contextmanager
def as_interrupts() -> Iterator[None]:
    """SIGTERM and SIGHUP raise Terminated inside the block (main thread only: elsewhere the
    block runs as it is). A signal this process was started ignoring stays ignored: under
    ``nohup`` a closed terminal stops nothing."""
    if not _main_thread():
        yield
        return
    previous = {signum: signal.getsignal(signum) for signum in HANDLED}
    for signum, handler in previous.items():
        if handler is not signal.SIG_IGN:
            signal.signal(signum, _raise)
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """Run the block whole: Ctrl-C, SIGTERM and SIGHUP that arrive during it are raised after."""
    global _deferring
    if _deferring:  # nested: the outer block raises
        yield
        return
    previous_int = signal.getsignal(signal.SIGINT)
    if previous_int is signal.default_int_handler:
        signal.signal(signal.SIGINT, _raise)
    _deferring = True
    try:
        yield
    finally:
        _deferring = False
        if previous_int is signal.default_int_handler:
            signal.signal(signal.SIGINT, previous_int)
        arrived = _pending[:1]
        _pending.clear()
    if arrived:
        _raise(arrived[0], None)


def end_with_parent(signum: int) -> None:
    """In a child before it starts (a ``preexec_fn``; Linux): send it ``signum`` when the
    process that started it dies, even by SIGKILL, so no child runs on without its parent."""
    import sys

    if sys.platform.startswith("linux"):
        import ctypes

        PR_SET_PDEATHSIG = 1
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signum), 0, 0, 0)


@contextlib.contextmanager
def interruptible(what: str, after: str) -> Iterator[None]:
    """``as_interrupts()``, and a stop inside the block (Ctrl-C, SIGTERM, SIGHUP; the children
    already stopped by ``run_child``) ends the command in one line, ``interrupted: <what>
    stopped by SIGTERM; <after>``, with exit status 128 + the signal's number."""
    from profiler.errors import Interrupted

    with as_interrupts():
        try:
            yield
        except KeyboardInterrupt as stop:
            raise Interrupted(
                f"{what} stopped by {describe(stop)}; {after}", exit_code=exit_code(stop)
            ) from None


def quiet_stop() -> bool:
    """Whether this process is a CLI child whose parent reports a stop (QUIET_STOP_ENV)."""
    return bool(os.environ.get(QUIET_STOP_ENV))


def _child_setup(stop: int) -> None:
    """In a child before it starts: ``stop`` takes effect there even where this process
    ignores SIGINT (started with ``&`` by a script), and the child gets ``stop`` when this
    process dies, even by SIGKILL."""
    try:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
    except (ValueError, OSError):
        pass
    end_with_parent(stop)


def popen_child(argv: list[str], *, stop: int = signal.SIGINT, **kwargs) -> subprocess.Popen:
    """``subprocess.Popen`` for a child that ``stop_child`` can end whole: a session (process
    group) of its own, so the terminal's Ctrl-C reaches only this process, which stops the
    child once (two SIGINTs would cut its clean-up short), and ``stop`` when this one dies."""
    return subprocess.Popen(
        argv, start_new_session=True, preexec_fn=functools.partial(_child_setup, stop), **kwargs
    )


def stop_child(
    process: subprocess.Popen, stop: int = signal.SIGINT, grace_s: float = CHILD_GRACE_S
) -> None:
    """End a child started by ``popen_child`` and whatever it started: ``stop`` to its process
    group, up to ``grace_s`` for the child to end (a CLI child removes its staging folders on
    SIGINT or SIGTERM), then SIGKILL to what is left of the group; the child is reaped. A second
    stop while it waits cuts the grace short."""
    if process.returncode is not None:  # reaped already: what it started may hold on
        _signal_group(process.pid, signal.SIGKILL)
        return
    _signal_group(process.pid, stop)
    try:
        _wait_unreaped(process.pid, grace_s)
    finally:
        # the child is not reaped yet, so its group's id is still its own: no other process
        # can be hit by the SIGKILL that ends what is left of the group
        _signal_group(process.pid, signal.SIGKILL)
        process.wait()


def run_child(
    argv: list[str],
    *,
    input: str | None = None,
    env: dict | None = None,
    capture: bool = True,
    timeout: float | None = None,
    stop: int = signal.SIGINT,
    grace_s: float = CHILD_GRACE_S,
    started=None,
) -> subprocess.CompletedProcess:
    """``subprocess.run(argv, text=True)`` (``capture``: stdout and stderr captured, else the
    user sees them) for a child that must not outlive a stop: on Ctrl-C, SIGTERM or SIGHUP
    (inside ``as_interrupts``) the child's group is stopped (``stop_child``) before the stop
    goes on; past ``timeout`` the same, then ``subprocess.TimeoutExpired`` with what it
    wrote. ``started(process)`` once it runs: a caller that waits on several children from
    threads (where no stop reaches this function) stops them itself."""
    pipe = subprocess.PIPE if capture else None
    process = popen_child(
        argv,
        stop=stop,
        env=env,
        text=True,
        stdout=pipe,
        stderr=pipe,
        stdin=subprocess.PIPE if input is not None else None,
    )
    if started is not None:
        started(process)
    try:
        out, err = process.communicate(input, timeout=timeout)
    except subprocess.TimeoutExpired as expired:
        out, err = _drain_stopped(process, stop, grace_s)
        raise subprocess.TimeoutExpired(argv, expired.timeout, output=out, stderr=err) from None
    except BaseException:
        _close_pipes(process)  # nothing more is read: a child blocked writing ends too
        stop_child(process, stop, grace_s)
        raise
    return subprocess.CompletedProcess(argv, process.returncode, out, err)


def _drain_stopped(process: subprocess.Popen, stop: int, grace_s: float):
    """A child past its time, stopped; what it wrote until it ended."""
    _signal_group(process.pid, stop)
    try:
        return process.communicate(timeout=grace_s)
    except subprocess.TimeoutExpired:
        _signal_group(process.pid, signal.SIGKILL)
        return process.communicate()
    except BaseException:
        _close_pipes(process)
        stop_child(process, signal.SIGKILL, 0.0)
        raise


def _close_pipes(process: subprocess.Popen) -> None:
    for pipe in (process.stdin, process.stdout, process.stderr):
        if pipe is not None:
            try:
                pipe.close()
            except OSError:
                pass


def _signal_group(group: int, signum: int) -> None:
    try:
        os.killpg(group, signum)
    except (ProcessLookupError, PermissionError):
        pass


def _wait_unreaped(pid: int, timeout: float) -> None:
    """Until the child ``pid`` has ended (left unreaped) or ``timeout`` seconds have passed."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
                return
        except ChildProcessError:
            return
        if time.monotonic() >= deadline:
            return
        time.sleep(0.02)
