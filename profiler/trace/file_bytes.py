"""A trace file's bytes: read, gunzipped (refusing a gzip bomb) or memory-mapped, or a gzip
file's text inflated a block at a time (``inflated_blocks``); one-line errors for a file that is
missing, a folder, empty, unreadable or damaged gzip.

Inflating is done by python-isal's igzip where it is installed (a base dependency; measured by
scripts/bench_large_traces.py against zlib-ng and the standard library's zlib on the same
file: about 2.0, 1.8 and 0.7 GB/s of JSON on the 2-core machine of docs/bench/), else by zlib.
"""

from __future__ import annotations

import gzip
import mmap
import os
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, cast

from profiler.errors import UserError


def _inflate_library() -> tuple[Any, tuple[type[BaseException], ...]]:
    """python-isal's zlib module (a base dependency) and its errors; zlib where it cannot be
    installed."""
    try:
        from isal import isal_zlib
    except ImportError:  # pragma: no cover
        return zlib, (zlib.error,)
    return isal_zlib, (zlib.error, cast("type[BaseException]", isal_zlib.error))


_inflate_module, _INFLATE_ERRORS = _inflate_library()
#: what inflating a damaged or truncated gzip stream raises
_DAMAGED: tuple[type[BaseException], ...] = (EOFError, gzip.BadGzipFile, *_INFLATE_ERRORS)
#: which library inflates gzip traces ("isal" or "zlib")
INFLATER = "zlib" if _inflate_module is zlib else "isal"

_GZIP_MAGIC = b"\x1f\x8b"
#: a trace file's text: read into memory, or mapped (see _MMAP_MIN_BYTES)
Data = bytes | mmap.mmap
#: plain files at least this big are memory-mapped rather than read: mapping page-cache pages is
#: much cheaper than copying them into fresh memory (on the 2-core VM this runs on, touching
#: fresh memory costs up to ~2.5 s per GB), and the loader only ever reads the buffer
_MMAP_MIN_BYTES = 1 << 20


def read_bytes(path: Path) -> bytes:
    """The JSON text of a trace file, gunzipped when needed; one-line errors for bad files."""
    data = read_data(path, mmap_ok=False)
    assert isinstance(data, bytes)
    return data


def read_data(path: Path, mmap_ok: bool = True) -> bytes | mmap.mmap:
    """Like read_bytes, but a large uncompressed file comes back as a read-only mmap."""
    if not path.exists():
        raise UserError(f"no such file: {path}")
    if path.is_dir():
        raise UserError(f"{path} is a folder, expected a trace file")
    try:
        return _read_file(path, mmap_ok)
    except OSError as error:
        raise UserError(f"cannot read {path}: {error.strerror or error}") from None


def _read_file(path: Path, mmap_ok: bool) -> bytes | mmap.mmap:
    with open(path, "rb") as f:
        magic = f.read(2)
        size = os.fstat(f.fileno()).st_size
        if mmap_ok and magic != _GZIP_MAGIC and size >= _MMAP_MIN_BYTES and path.suffix != ".gz":
            return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        data = magic + f.read()
    if not data:
        raise UserError(f"{path} is empty: not a trace")
    if data[:2] == _GZIP_MAGIC:
        data = b"".join(_checked_inflate(path, iter([data]), len(data)))
        if not data:
            raise UserError(f"{path} holds an empty gzip stream: not a trace")
    elif path.suffix == ".gz":
        raise UserError(f"{path} ends in .gz but is not gzip data")
    return data


def is_gzip(path: Path) -> bool:
    """Whether ``path`` holds gzip data (its first two bytes); one-line errors as read_data."""
    if not path.exists():
        raise UserError(f"no such file: {path}")
    if path.is_dir():
        raise UserError(f"{path} is a folder, expected a trace file")
    try:
        with open(path, "rb") as f:
            return f.read(2) == _GZIP_MAGIC
    except OSError as error:
        raise UserError(f"cannot read {path}: {error.strerror or error}") from None


#: compressed bytes read, and inflated bytes handed out, at a time
_READ_BYTES = 1 << 20
_INFLATED_BYTES = 8 << 20


def inflated_blocks(path: Path, done: Callable[[int, int], Any] | None = None) -> Iterator[bytes]:
    """The text of a gzip trace, inflated a block of at most 8 MB at a time, so that reading
    it never holds more than a block (``read_data`` inflates it whole). ``done(read, size)``
    is told the compressed bytes read so far after each block. One-line errors for a damaged
    or truncated file and a gzip bomb, as read_data."""
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size

            def compressed() -> Iterator[bytes]:
                while block := f.read(_READ_BYTES):
                    yield block
                    if done is not None:
                        done(f.tell(), size)

            yielded = False
            for block in _checked_inflate(path, compressed(), size):
                yielded = yielded or bool(block)
                yield block
    except OSError as error:
        raise UserError(f"cannot read {path}: {error.strerror or error}") from None
    if not yielded:
        raise UserError(f"{path} holds an empty gzip stream: not a trace")


def as_utf8(data: bytes | mmap.mmap) -> bytes:
    text = bytes(data).decode("utf-8", errors="replace").encode("utf-8")
    if isinstance(data, mmap.mmap):
        data.close()
    return text


#: a trace's JSON compresses about 10:1; far beyond this, the file is a gzip bomb
_MAX_INFLATION = 200
_INFLATE_FLOOR = 256 << 20  # small files may inflate to this whatever their ratio


def _checked_inflate(path: Path, compressed: Iterator[bytes], size: int) -> Iterator[bytes]:
    """The inflated blocks of a gzip stream given in blocks (``size`` bytes in all); a
    damaged or truncated stream, or one that inflates beyond _MAX_INFLATION times its size (a
    gzip bomb would take the machine's memory), is a one-line error."""
    try:
        yield from _inflate(path, compressed, max(_INFLATE_FLOOR, _MAX_INFLATION * size))
    except _DAMAGED as error:
        raise UserError(f"{path} is a damaged or truncated gzip file ({error})") from None


def _inflate(path: Path, compressed: Iterator[bytes], limit: int) -> Iterator[bytes]:
    """gzip.decompress a block at a time (members one after another, NULs between them
    skipped, as gzip.decompress reads them), refusing more than ``limit`` bytes of text."""
    total = 0
    inflater: Any = None  # the member being inflated; None between members
    for pending in compressed:
        while pending:
            if inflater is None:
                pending = pending.lstrip(b"\0")
                if not pending:
                    break
                inflater = _inflate_module.decompressobj(16 + zlib.MAX_WBITS)
            piece = inflater.decompress(pending, min(_INFLATED_BYTES, limit + 1 - total))
            pending = inflater.unconsumed_tail
            total += len(piece)
            if total > limit:
                raise UserError(
                    f"{path} inflates to more than {limit >> 20} MiB, over "
                    f"{_MAX_INFLATION} times its size: a gzip bomb, not a trace"
                )
            if piece:
                yield piece
            if inflater.eof:  # a further gzip member may follow
                pending = inflater.unused_data + pending
                inflater = None
    if inflater is not None:
        raise EOFError("compressed file ended before the end-of-stream marker was reached")
