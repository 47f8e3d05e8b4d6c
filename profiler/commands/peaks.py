"""`peaks`: measure (or read the cached) ceilings of this machine and print them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from profiler.commands.sink import Sink
from profiler.errors import UserError


def run(
    refresh: bool = False,
    cache_dir: Path | None = None,
    matmul_n: int | None = None,
    copy_mib: int | None = None,
    *,
    sink: Sink,
) -> dict[str, Any]:
    """``sink``: profiler.cli.output.Output, where the table or the --json document go."""
    for flag, value, limit in (("--matmul-n", matmul_n, 2**16), ("--copy-mib", copy_mib, 2**20)):
        if value is not None and not 1 <= value <= limit:
            raise UserError(f"{flag} must be from 1 to {limit} (got {value})")
    from profiler.commands import loading_torch

    with loading_torch():
        from profiler.collect import measured_peaks

    sizes = measured_peaks.sizes(matmul_n, copy_mib)
    sink.note("measuring..." if refresh else "reading or measuring...")
    data, path, measured = measured_peaks.peaks(
        cache_dir, refresh=refresh or sizes is not None, sizes=sizes
    )
    if sink.json:
        sink.document("peaks", {**data, "cache_file": str(path)})
        return data
    from profiler.report.peaks_view import print_peaks

    print_peaks(data, path, measured, echo=sink.line)
    return data
