"""The robust path: parse the whole file into one Raw per event, then decode those in chunks;
it gives the error messages for a file that is not a trace."""

from __future__ import annotations

from pathlib import Path

import msgspec

from profiler.errors import UserError
from profiler.trace.columns import ColumnBuilder
from profiler.trace.decode import FILE_DECODER, complete_events, devices_of
from profiler.trace.file_bytes import Data
from profiler.trace.parsed_trace import Trace

_CHUNK = 100_000  # events decoded into Structs at a time


def load_robust(path: Path, data: Data) -> Trace:
    try:
        head = FILE_DECODER.decode(data)
    except msgspec.ValidationError as error:
        if "traceEvents" in str(error):
            raise UserError(
                f"{path} is JSON but has no traceEvents list: not a Kineto/Chrome "
                "trace (torch.profiler writes one with export_chrome_trace or "
                "tensorboard_trace_handler)"
            ) from None
        raise UserError(f"{path} is not a trace object: {error}") from None
    except msgspec.DecodeError as error:
        _not_utf8(error)
        raise UserError(f"{path} is not valid JSON, perhaps truncated ({error})") from None

    devices = devices_of(head)
    raws = head.traceEvents
    del head
    builder = ColumnBuilder()
    for start in range(0, len(raws), _CHUNK):
        chunk = b"[" + b",".join(raws[start : start + _CHUNK]) + b"]"
        try:
            events = complete_events(chunk)
        except msgspec.ValidationError as error:
            raise UserError(f"{path}: an event has an unexpected field type ({error})") from None
        except msgspec.DecodeError as error:
            _not_utf8(error)
            raise UserError(f"{path} is not valid JSON ({error})") from None
        builder.add(events)
        del events, chunk
    del raws
    return builder.finish(path, devices)


def _not_utf8(error: msgspec.DecodeError) -> None:
    """msgspec's word for bytes that are not UTF-8, as the UnicodeDecodeError the loader reads
    again with U+FFFD for them (load.py)."""
    if "UTF-8" in str(error):
        raise UnicodeDecodeError("utf-8", b"", 0, 1, str(error)) from None
