"""SIGTERM and SIGHUP end a command the way Ctrl-C does.

``kill``, ``timeout``, systemd, CI cancellation and a closed terminal send SIGTERM or SIGHUP,
not SIGINT. Inside ``as_interrupts()`` both raise ``Terminated``, a KeyboardInterrupt, so every
``except KeyboardInterrupt`` / ``finally`` path that Ctrl-C takes (staging folders removed, a
sweep's running cell stopped and recorded, its tables written) runs for them too; the CLI then
exits 128 + the signal's number (143 for SIGTERM, 129 for SIGHUP; Ctrl-C stays 130).

``deferred()`` holds these signals and Ctrl-C back for a few statements that must not be cut
in half (moving a finished run into place); one that arrives meanwhile is raised at its end.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator

HANDLED = (signal.SIGTERM, signal.SIGHUP)
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


@contextlib.contextmanager
def as_interrupts() -> Iterator[None]:
    """SIGTERM and SIGHUP raise Terminated inside the block (main thread only)."""
    previous = {signum: signal.signal(signum, _raise) for signum in HANDLED}
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
