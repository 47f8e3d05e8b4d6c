"""The fast path's cutting: the traceEvents text split into pieces of whole events without
parsing the file first, each piece decoded and added to the columns."""

from __future__ import annotations

import mmap
import re
from collections.abc import Callable, Iterator
from typing import Any

import msgspec

from profiler.trace.columns import ColumnBuilder
from profiler.trace.decode import HEAD_DECODER, Complete, Head, complete_events
from profiler.trace.file_bytes import Data

# Decoding a GB-sized trace in one go would hold every event's Struct at once (~1.6 GB for 1 GB
# of JSON), and parsing it once just to find the events (a list of msgspec.Raw) costs a second
# full scan plus a copy of every event. Instead the events text is cut into pieces of about
# _PIECE_BYTES at what looks like the end of an event: '}', the list's ',' and the next '{"'
# (JSON whitespace between). That pattern can also occur inside an event (kernel names such as
# '...{lambda()#1}, {...', a list of objects in args), so nothing found is trusted until msgspec
# has decoded it strictly:
#
# - a piece is decoded as '[' + text + ']' (complete_events). If the text does not end exactly
#   at the end of a top-level event, the object it cuts into is left unclosed and the strict
#   decoder rejects the piece (appending ']' cannot close a '{'); then the next candidate is
#   tried. So a piece that decodes is a whole number of events, and the next piece starts at
#   the '{' after the list's comma;
# - the whole file minus the events array (the array replaced by a marker) is decoded as the
#   trace object, and must have the marker as its traceEvents: this checks the array's bounds
#   and everything outside it (deviceProperties, JSON validity of the rest).
#
# Anything unexpected (the checks failing, an invalid or unusual file) sends the file to the
# robust path (robust.py), which parses it in full and gives the error messages. The result is the
# same either way (tests/test_trace_loading.py checks it on re-formatted fixtures).

_EVENTS_KEY = re.compile(rb'"traceEvents"[ \t\n\r]*:[ \t\n\r]*\[')
#: an event's closing brace, the list's comma and the next event's opening '{"'
EVENT_END = re.compile(rb'\}[ \t\n\r]*,[ \t\n\r]*(\{)[ \t\n\r]*"')
_MARKER = b'["traceEvents-splice-marker"]'
_PIECE_BYTES = 2 << 20  # JSON text decoded into Structs at a time (smaller pieces stay in cache)
_CUT_TRIES = 8  # candidate cuts tried per piece before parsing the file in full
_END_TRIES = 16  # candidate ends of the events array


def split_head(data: Data) -> tuple[Head, int, int] | None:
    """The trace object without its events, and the events array's inner bounds [start, end)."""
    key = _EVENTS_KEY.search(data)
    if key is None:
        return None
    start = key.end()  # just after '['
    # The array's ']' is one of the file's last few ']'. Splicing the marker in at a ']' inside
    # the array leaves that array's closers unmatched (invalid); at a ']' after it (a list in a
    # later key) it can be valid too, so the first valid one from the start is the array's.
    found = None
    end = len(data)
    for _ in range(_END_TRIES):
        end = data.rfind(b"]", start, end)
        if end < 0:
            break
        text = b"".join((data[: start - 1], _MARKER, data[end + 1 :]))
        try:
            head = HEAD_DECODER.decode(text)
        except (msgspec.DecodeError, msgspec.ValidationError):
            continue
        if bytes(head.traceEvents) == _MARKER and text.count(_MARKER) == 1:
            found = head, start, end
    return found


def build_range(
    data: Data,
    start: int,
    end: int,
    builder: ColumnBuilder | None = None,
    progress: Callable[[int], Any] | None = None,
) -> ColumnBuilder | None:
    """The columns of the events text [start, end), piece by piece (added to ``builder``, a
    new one by default); None when a piece does not decode (then the caller parses the file
    another way). The pages of a memory-mapped file are let go as the pieces are read, so
    reading a file holds a piece of it, not the file. ``progress(done)`` is told the bytes
    read so far after each piece."""
    view = memoryview(data)
    builder = ColumnBuilder() if builder is None else builder
    released = start
    try:
        pos = start
        while True:
            events, stop = _decode_piece(data, view, pos, end)
            # (every piece after the first starts at a '{', so a trailing comma, '[..., ]', is
            # never a piece of its own: it fails to decode with the last event)
            if events is None:
                return None
            builder.add(events)
            del events
            if progress is not None:
                progress(stop)
            if stop - released >= _RELEASE_BYTES or stop == end:
                release(data, released, stop)
                released = stop
            if stop == end:
                return builder
            pos = stop
    finally:
        view.release()


#: mapped text read before its pages are let go
_RELEASE_BYTES = 16 << 20


def release(data: Data, start: int, stop: int) -> None:
    """Let go of the pages of a memory-mapped file's bytes [start, stop) (they stay in the page
    cache, not in this process's memory); nothing for bytes in memory."""
    if isinstance(data, mmap.mmap) and hasattr(mmap, "MADV_DONTNEED"):
        first = (start // mmap.PAGESIZE) * mmap.PAGESIZE
        length = stop - first
        if length > 0:
            try:
                data.madvise(mmap.MADV_DONTNEED, first, min(length, len(data) - first))
            except (OSError, ValueError):  # not on this system: the pages stay mapped
                pass


class TextStream:
    """The events text of a trace that comes a block at a time (a gzip file inflated as it is
    read), as chunks of whole events (``chunks``): a reader holds a chunk and a block at a time.
    A chunk ends at a candidate event boundary (EVENT_END): decoding it strictly proves the
    boundary, as for a piece. The last chunk runs to the events array's end, found with the
    trace object around it when the text ends (``split_head``, which sets ``head``: None after
    the chunks when the text is not a trace the fast path takes)."""

    def __init__(self, blocks: Iterator[bytes]) -> None:
        self.blocks = blocks
        self.head: Head | None = None

    def chunks(self, size: int) -> Iterator[bytes]:
        text = bytearray()
        found = None
        for block in self.blocks:  # the head, up to the events array's '['
            text += block
            found = _EVENTS_KEY.search(text)
            if found is not None:
                break
        if found is None:
            return
        head_text = bytes(text[: found.end()])
        del text[: found.end()]
        for block in self.blocks:
            text += block
            pos = 0
            while len(text) - pos > size + _PIECE_BYTES:
                cut = EVENT_END.search(text, pos + size)
                if cut is None:
                    break
                yield bytes(text[pos : cut.start() + 1])
                pos = cut.start(1)
            del text[:pos]
        # the last events, the array's end and what follows it: checked as a whole file
        rest = head_text + bytes(text)
        del text
        split = split_head(rest)
        if split is not None and split[1] == len(head_text):
            self.head = split[0]
            yield rest[split[1] : split[2]]


def build_stream(stream: TextStream) -> ColumnBuilder | None:
    """The columns of a TextStream's events in one process; None when a chunk does not decode
    or the text is not a trace the fast path takes."""
    builder = ColumnBuilder()
    for chunk in stream.chunks(STREAM_CHUNK_BYTES):
        if build_range(chunk, 0, len(chunk), builder) is None:
            return None
    return builder if stream.head is not None else None


#: a TextStream's chunks: what one process decodes while the other is given the next
STREAM_CHUNK_BYTES = 8 << 20


def _decode_piece(
    data: Data, view: memoryview, pos: int, end: int
) -> tuple[list[Complete] | None, int]:
    """The events of about _PIECE_BYTES of text from ``pos``, and where the next piece starts
    (``end`` after the last piece); None when no cut decodes (then the file is parsed in full).
    """
    search_from = pos + _PIECE_BYTES
    for _ in range(_CUT_TRIES):
        cut = EVENT_END.search(data, search_from, end) if search_from < end else None
        stop = cut.start() + 1 if cut else end
        try:
            # (a bracketed copy of the piece: decoding in place from the mapping was measured
            # slower, the copy is hot in cache when msgspec reads it)
            events = complete_events(b"".join((b"[", view[pos:stop], b"]")))
        except msgspec.DecodeError:
            if cut is None:
                return None, end
            search_from = stop  # that '}' was inside an event: try the next candidate
            continue
        except msgspec.ValidationError:
            return None, end
        return events, (cut.start(1) if cut else end)
    return None, end
