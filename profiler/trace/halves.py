"""A large trace read by two processes: the events text in chunks, each process taking the next
chunk not taken yet, a forked child sending its columns back."""

from __future__ import annotations

import fcntl
import os
import pickle
import queue
import struct
import termios
import threading
import warnings
from collections.abc import Callable
from typing import Any

from profiler.trace.columns import BuilderState, ColumnBuilder, merged
from profiler.trace.file_bytes import Data
from profiler.trace.pieces import EVENT_END, STREAM_CHUNK_BYTES, TextStream, build_range

# Decoding is Python-bound work on one core. A large trace's events text is cut at fixed
# offsets into chunks of about _CHUNK_BYTES; this process and a forked child each take the next
# chunk nobody has taken (a pipe holds the chunk numbers: a read of one takes it) until none is
# left, so both stay busy however the machine shares its cores, and build each chunk's columns.
# The child then pickles its columns back, and the chunks are put in file order with names and
# threads renumbered as if one process had read the file from the start (the result is
# identical; tests compare the two).
#
# A chunk starts at the first event boundary (pieces.EVENT_END) at or after its offset and ends
# where the next one starts. Both processes find the same boundaries; each chunk's last piece
# must decode strictly, ending there, so a chunk that decodes proves the next chunk's start is
# an event's start (from the events array's start on). Anything unexpected (a boundary inside an
# event, a child that died) falls back to one process.

#: forking needs a POSIX system; off under a test that wants the one-process path
PARALLEL_LOAD = hasattr(os, "fork") and (os.cpu_count() or 1) >= 2
#: below this, a fork and the transfer of the child's columns cost more than they save
PARALLEL_MIN_BYTES = 64 << 20
#: the events text taken at a time: small enough that neither process waits long for the
#: other at the end, large enough that the chunks' boundary searches cost nothing
_CHUNK_BYTES = 32 << 20
_TOKEN = struct.Struct("<i")


def build_halves(
    data: Data | TextStream,
    start: int = 0,
    end: int = 0,
    progress: Callable[[int], Any] | None = None,
) -> ColumnBuilder | None:
    """The columns of the events text [start, end) of ``data`` read by this process and a
    child, or those of a TextStream (``_stream_halves``); None when a chunk does not decode
    (then one process reads it). ``progress(done)`` is told the bytes of text taken so far
    after each chunk this process reads."""
    if isinstance(data, TextStream):
        return _stream_halves(data)
    chunks = _chunks(data, start, end)
    tokens_read, tokens_write = os.pipe()
    with os.fdopen(tokens_write, "wb") as queue:  # every chunk number, taken one at a time
        queue.write(b"".join(_TOKEN.pack(k) for k in range(len(chunks))))
    result_read, result_write = os.pipe()
    with warnings.catch_warnings():  # (the child never takes a lock another thread may hold)
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # the child: its chunks' columns, pickled down the pipe
        os.close(result_read)
        try:
            state = _take_chunks(data, chunks, tokens_read)
            with os.fdopen(result_write, "wb") as pipe:
                pickle.dump(state, pipe, protocol=pickle.HIGHEST_PROTOCOL)
        finally:
            os._exit(0)
    os.close(result_write)
    result = os.fdopen(result_read, "rb")
    try:
        told = None if progress is None else _Told(progress, chunks, tokens_read)
        mine = _take_chunks(data, chunks, tokens_read, told)
        theirs = _received(result)
    finally:  # (closed first: a child still writing then stops)
        result.close()
        os.close(tokens_read)
        os.waitpid(pid, 0)
    if mine is None or theirs is None:
        return None
    return merged([mine, theirs])


def _received(pipe: Any) -> BuilderState | None:
    """The child's columns (None when it found a chunk that does not decode)."""
    try:
        state: BuilderState | None = pickle.load(pipe)
    except Exception:  # the child died (killed for memory) before writing it all
        return None
    return state


def _chunks(data: Data, start: int, end: int) -> list[tuple[int, int]]:
    """The events text [start, end) as chunks [from, to): each starts at an event's '{' and
    ends at the '}' of the event before the next chunk's start; at least two."""
    n = max(2, (end - start) // _CHUNK_BYTES)
    starts: list[int] = [start]
    ends: list[int] = []
    for k in range(1, n):
        cut = EVENT_END.search(data, max(start + (end - start) * k // n, starts[-1] + 1), end)
        if cut is None:
            break
        ends.append(cut.start() + 1)
        starts.append(cut.start(1))
    ends.append(end)
    return list(zip(starts, ends))


class _Told:
    """This process's progress callback: the text taken by both processes so far (the chunk
    numbers left in the pipe say how many are taken)."""

    def __init__(self, progress: Callable[[int], Any], chunks: list[tuple[int, int]], fd: int):
        self.progress, self.chunks, self.fd = progress, chunks, fd

    def __call__(self) -> None:
        left = struct.unpack("i", fcntl.ioctl(self.fd, termios.FIONREAD, b"\0\0\0\0"))[0]
        taken = len(self.chunks) - left // _TOKEN.size
        done = self.chunks[taken - 1][1] - self.chunks[0][0] if taken else 0
        self.progress(done)


def _take_chunks(
    data: Data, chunks: list[tuple[int, int]], queue: int, told: _Told | None = None
) -> BuilderState | None:
    """The columns of the chunks this process takes from ``queue`` until none is left; None
    when one does not decode (the other process then stops at its next chunk too)."""
    builder = ColumnBuilder()
    while len(token := os.read(queue, _TOKEN.size)) == _TOKEN.size:
        (k,) = _TOKEN.unpack(token)
        first, last = chunks[k]
        if build_range(data, first, last, builder) is None:
            _drain(queue)
            return None
        builder.mark(k)
        if told is not None:
            told()
    return builder.state()


def _drain(queue: int) -> None:
    """Take every chunk left, so that the other process stops too (nobody writes the pipe any
    more: a read of an empty one is its end)."""
    while os.read(queue, 1 << 16):
        pass


# A TextStream (a gzip trace) cannot be cut at offsets before it is read: this process inflates
# it and cuts its chunks, and hands each next chunk to the child while the child has fewer than
# _AHEAD chunks to decode (it says when it finished one: a byte on the "done" pipe), else decodes
# it itself. A thread writes the chunks given into the child's pipe, so neither process waits on
# the other while it decodes.
_HEADER = struct.Struct("<iq")  # chunk number (-1: no more), bytes that follow
_AHEAD = 2


def _stream_halves(stream: TextStream) -> ColumnBuilder | None:
    to_child_read, to_child_write = os.pipe()
    done_read, done_write = os.pipe()
    result_read, result_write = os.pipe()
    with warnings.catch_warnings():  # (the child never takes a lock another thread may hold)
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # the child: the chunks it is given, its columns pickled down the pipe
        for fd in (to_child_write, done_read, result_read):
            os.close(fd)
        try:
            state = _given_chunks(to_child_read, done_write)
            with os.fdopen(result_write, "wb") as pipe:
                pickle.dump(state, pipe, protocol=pickle.HIGHEST_PROTOCOL)
        finally:
            os._exit(0)
    for fd in (to_child_read, done_write, result_write):
        os.close(fd)
    os.set_blocking(done_read, False)
    result = os.fdopen(result_read, "rb")
    child = _Sender(to_child_write)
    builder: ColumnBuilder | None = ColumnBuilder()
    try:
        given = finished = 0
        for k, chunk in enumerate(stream.chunks(STREAM_CHUNK_BYTES)):
            finished += _finished(done_read)
            if given - finished < _AHEAD:
                child.send(k, chunk)
                given += 1
            elif builder is not None:
                if build_range(chunk, 0, len(chunk), builder) is None:
                    builder = None  # (the stream is read to its end: the child waits)
                else:
                    builder.mark(k)
        child.close()
        theirs = _received(result)
    finally:  # (closed first: a child still writing then stops)
        child.close()
        result.close()
        os.close(done_read)
        os.waitpid(pid, 0)
    if builder is None or theirs is None or stream.head is None:
        return None
    return merged([builder.state(), theirs])


class _Sender:
    """The chunks given to the child, written into its pipe by a thread of their own (a write
    waits for the child to read; this process decodes meanwhile), then the end."""

    def __init__(self, fd: int) -> None:
        self.pipe = os.fdopen(fd, "wb", buffering=0)
        self.queue: queue.Queue[tuple[int, bytes] | None] = queue.Queue()
        self.thread = threading.Thread(target=self._write, daemon=True)
        self.thread.start()

    def send(self, k: int, chunk: bytes) -> None:
        self.queue.put((k, chunk))

    def _write(self) -> None:
        try:
            while (item := self.queue.get()) is not None:
                k, chunk = item
                self.pipe.write(_HEADER.pack(k, len(chunk)))
                self.pipe.write(chunk)
            self.pipe.write(_HEADER.pack(-1, 0))
        except OSError:  # the child is gone: nothing more to give it
            pass
        finally:
            self.pipe.close()

    def close(self) -> None:
        if self.thread.is_alive():
            self.queue.put(None)
            self.thread.join()


def _finished(done: int) -> int:
    """How many chunks the child finished since last asked (a byte each on the done pipe)."""
    try:
        return len(os.read(done, 1 << 16))
    except BlockingIOError:
        return 0


def _given_chunks(given: int, done: int) -> BuilderState | None:
    """The child's side: the columns of the chunks it is given until the end; None when one
    does not decode."""
    builder = ColumnBuilder()
    failed = False
    with os.fdopen(given, "rb") as pipe:
        while True:
            k, size = _HEADER.unpack(pipe.read(_HEADER.size))
            if k < 0:
                break
            chunk = pipe.read(size)
            if not failed and build_range(chunk, 0, len(chunk), builder) is None:
                failed = True
            elif not failed:
                builder.mark(k)
            os.write(done, b"d")
    os.close(done)
    return None if failed else builder.state()
