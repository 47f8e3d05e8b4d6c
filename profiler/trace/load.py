"""Kineto trace file (JSON or .json.gz) -> typed columns: ``load_trace``.

The loader reads the file in one pass (file_bytes.py: a plain file memory-mapped, its pages let go
as they are read; a gzip file inflated a block at a time), cuts its events text into pieces of
whole events (pieces.py; a large plain file in two processes, halves.py), decodes each piece
into small typed Structs (decode.py, built from the schema tables in schema.py) and turns them
into numpy columns (columns.py), leaving out events whose values cannot be real (excluded.py).
What it holds is the columns, not the file. A file the fast path does not take is parsed in
full (robust.py), which also gives the error messages. The result is a Trace (record.py)
either way. A trace of more than PROGRESS_MIN_BYTES says how far it is (notices.progress).
"""

from __future__ import annotations

import gc
import mmap
import time
from collections.abc import Callable
from pathlib import Path

from profiler import notices, units
from profiler.errors import UserError
from profiler.trace import halves
from profiler.trace.columns import give_back_memory
from profiler.trace.decode import devices_of
from profiler.trace.file_bytes import Data, as_utf8, inflated_blocks, is_gzip, read_bytes, read_data
from profiler.trace.parsed_trace import Trace
from profiler.trace.pieces import TextStream, build_range, build_stream, split_head
from profiler.trace.robust import load_robust
from profiler.trace.schema import KIND, KINDS, DeviceProperties

#: the names readers of a trace import from here
__all__ = ["KIND", "KINDS", "DeviceProperties", "Trace", "load_trace", "read_bytes"]

#: a trace file larger than this (its text, or a gzip file itself) says how far reading it is
PROGRESS_MIN_BYTES = 1_000_000_000


def load_trace(path: Path | str) -> Trace:
    # millions of short-lived objects and no reference cycles: the cyclic GC would only rescan
    # them over and over, so it is paused while decoding
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _load(Path(path))
    finally:
        if enabled:
            gc.enable()
        give_back_memory()


def _load(path: Path) -> Trace:
    if is_gzip(path):
        found = _load_gzip(path)
        if found is not None:
            return found
    data = read_data(path)
    try:
        try:
            return _load_split(path, data) or load_robust(path, data)
        except UnicodeDecodeError:  # bytes that are not UTF-8 in a name: shown as U+FFFD
            notices.note(
                f"{path} holds bytes that are not UTF-8: they read as U+FFFD (the replacement "
                "character) in the names that hold them"
            )
            data = as_utf8(data)
            return _load_split(path, data) or load_robust(path, data)
    except UnicodeDecodeError as error:
        raise UserError(
            f"{path} is not UTF-8 text ({error.reason} at byte {error.start})"
        ) from None
    except RecursionError:
        raise UserError(f"{path} nests JSON lists or objects too deeply to be a trace") from None
    finally:
        if isinstance(data, mmap.mmap):
            try:
                data.close()
            except BufferError:  # a view is still alive (an exception's traceback): GC closes it
                pass


def _load_split(path: Path, data: Data) -> Trace | None:
    split = split_head(data)
    if split is None:
        return None
    head, start, end = split
    told = _progress(path, len(data))
    builder = (
        halves.build_halves(data, start, end, told)
        if halves.PARALLEL_LOAD and len(data) >= halves.PARALLEL_MIN_BYTES
        else None
    )
    if builder is None:
        builder = build_range(data, start, end, progress=told)
    return builder.finish(path, devices_of(head)) if builder is not None else None


def _load_gzip(path: Path) -> Trace | None:
    """A gzip trace read as it is inflated (pieces.stream_events); None when the stream does
    not decode as a trace (the caller then reads the whole text the other ways)."""
    size = path.stat().st_size
    told = _progress(path, size, compressed=True)
    stream = TextStream(inflated_blocks(path, None if told is None else lambda read, _: told(read)))
    try:
        # (a trace's JSON compresses about 10:1: the text's size, for the two-process limit)
        if halves.PARALLEL_LOAD and 10 * size >= halves.PARALLEL_MIN_BYTES:
            builder = halves.build_halves(stream)
        else:
            builder = build_stream(stream)
    except RecursionError:
        raise UserError(f"{path} nests JSON lists or objects too deeply to be a trace") from None
    if builder is None or stream.head is None:
        return None
    return builder.finish(path, devices_of(stream.head))


def _progress(path: Path, size: int, compressed: bool = False) -> Callable[[int], None] | None:
    """``told(done)``: a line each time another tenth of ``size`` bytes is read (said through
    notices.progress); None for a file too small to need it."""
    if size <= (PROGRESS_MIN_BYTES // 10 if compressed else PROGRESS_MIN_BYTES):
        return None
    started = time.perf_counter()
    said = [0]
    what = units.size(size / 2**20, "MiB") + (" compressed" if compressed else "")

    def told(done: int) -> None:
        tenth = 10 * done // size
        if tenth > said[0] and tenth < 10:
            said[0] = tenth
            seconds = units.wall_time(time.perf_counter() - started)
            notices.progress(f"reading {path.name}: {10 * tenth} % of {what} ({seconds})")

    return told
