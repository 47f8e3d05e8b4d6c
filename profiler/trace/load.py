"""Kineto trace file (JSON or .json.gz) -> typed columns: ``load_trace``.

The loader reads the file (files.py), cuts its events text into pieces of whole events
(pieces.py; a large file in two processes, halves.py), decodes each piece into small typed
Structs (decode.py, built from the schema tables in schema.py) and turns them into numpy columns
(columns.py), leaving out events whose values cannot be real (excluded.py). A file the fast path
does not take is parsed in full (robust.py), which also gives the error messages. The result is
a Trace (record.py) either way.
"""

from __future__ import annotations

import gc
import mmap
from pathlib import Path

from profiler.errors import UserError
from profiler.trace import halves
from profiler.trace.decode import devices_of
from profiler.trace.files import Data, as_utf8, read_bytes, read_data
from profiler.trace.pieces import build_range, split_head
from profiler.trace.record import Trace
from profiler.trace.robust import load_robust
from profiler.trace.schema import KIND, KINDS, DeviceProperties

#: the names readers of a trace import from here
__all__ = ["KIND", "KINDS", "DeviceProperties", "Trace", "load_trace", "read_bytes"]


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


def _load(path: Path) -> Trace:
    data = read_data(path)
    try:
        try:
            return _load_split(path, data) or load_robust(path, data)
        except UnicodeDecodeError:  # bytes that are not UTF-8 in a name: shown as U+FFFD
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
    builder = (
        halves.build_halves(data, start, end)
        if halves.PARALLEL_LOAD and len(data) >= halves.PARALLEL_MIN_BYTES
        else None
    )
    if builder is None:
        builder = build_range(data, start, end)
    return builder.finish(path, devices_of(head)) if builder is not None else None
