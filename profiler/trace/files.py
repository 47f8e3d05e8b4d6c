"""A trace file's bytes: read, gunzipped (refusing a gzip bomb) or memory-mapped; one-line
errors for a file that is missing, a folder, empty, unreadable or damaged gzip."""

from __future__ import annotations

import gzip
import mmap
import os
import zlib
from pathlib import Path

from profiler.errors import UserError

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
        try:
            data = _gunzip(path, data)
        except (EOFError, zlib.error, gzip.BadGzipFile) as error:
            raise UserError(f"{path} is a damaged or truncated gzip file ({error})") from None
        if not data:
            raise UserError(f"{path} holds an empty gzip stream: not a trace")
    elif path.suffix == ".gz":
        raise UserError(f"{path} ends in .gz but is not gzip data")
    return data


def as_utf8(data: bytes | mmap.mmap) -> bytes:
    text = bytes(data).decode("utf-8", errors="replace").encode("utf-8")
    if isinstance(data, mmap.mmap):
        data.close()
    return text


#: a trace's JSON compresses about 10:1; far beyond this, the file is a gzip bomb
_MAX_INFLATION = 200
_INFLATE_FLOOR = 256 << 20  # small files may inflate to this whatever their ratio


def _gunzip(path: Path, data: bytes) -> bytes:
    """gzip.decompress in pieces, refusing a stream that inflates beyond _MAX_INFLATION times
    its size (a gzip bomb would take the machine's memory)."""
    limit = max(_INFLATE_FLOOR, _MAX_INFLATION * len(data))
    pieces, total, rest = [], 0, data
    while rest:
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        while rest and not inflater.eof:
            piece = inflater.decompress(rest[: 1 << 20], limit + 1 - total)
            rest = inflater.unconsumed_tail + rest[1 << 20 :]
            total += len(piece)
            pieces.append(piece)
            if total > limit:
                raise UserError(
                    f"{path} inflates to more than {limit >> 20} MiB, over "
                    f"{_MAX_INFLATION} times its size: a gzip bomb, not a trace"
                )
        if not inflater.eof:
            raise EOFError("compressed file ended before the end-of-stream marker was reached")
        rest = inflater.unused_data.lstrip(b"\0")  # a further gzip member, as gzip.decompress
    return b"".join(pieces)
