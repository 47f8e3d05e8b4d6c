"""A large trace read by two processes: a forked child builds the second half's columns."""

from __future__ import annotations

import os
import pickle
import warnings

from profiler.trace.columns import ColumnBuilder
from profiler.trace.files import Data
from profiler.trace.pieces import EVENT_END, build_range

# Decoding is Python-bound work on one core. A large trace is cut in two at an event boundary
# near its middle: a forked child process builds the second half's columns while this process
# builds the first half's, and the child's columns are appended with its names and threads
# renumbered as if one process had read the file from the start (the result is identical; a
# test compares the two). The cut is checked like every piece cut: the first half's last piece
# must decode strictly, ending there. Anything unexpected falls back to one process.

#: forking needs a POSIX system; off under a test that wants the one-process path
PARALLEL_LOAD = hasattr(os, "fork") and (os.cpu_count() or 1) >= 2
#: below this, a fork and the transfer of the child's columns cost more than they save
PARALLEL_MIN_BYTES = 64 << 20
#: the share of the events text this process reads: after its part it still unpickles the
#: child's columns and builds the frames (~0.6 s of ~6.7 s of CPU on a 1 GB trace), so the
#: child takes a little more than half
_FIRST_SHARE = 0.45


def build_halves(data: Data, start: int, end: int) -> ColumnBuilder | None:
    cut = EVENT_END.search(data, start + int((end - start) * _FIRST_SHARE), end)
    if cut is None:
        return None
    read_end, write_end = os.pipe()
    with warnings.catch_warnings():  # (the child never takes a lock another thread may hold)
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # the child: the second half's columns, pickled down the pipe
        os.close(read_end)
        try:
            second = build_range(data, cut.start(1), end)
            with os.fdopen(write_end, "wb") as pipe:
                pickle.dump(
                    second.state() if second is not None else None,
                    pipe,
                    protocol=pickle.HIGHEST_PROTOCOL,
                )
        finally:
            os._exit(0)
    os.close(write_end)
    try:
        first = build_range(data, start, cut.start() + 1)
        with os.fdopen(read_end, "rb") as pipe:
            try:
                second = pickle.load(pipe)
            except Exception:  # the child died (killed for memory) before writing it all
                second = None
    finally:
        os.waitpid(pid, 0)
    if first is None or second is None:
        return None
    first.append_state(second)
    return first
