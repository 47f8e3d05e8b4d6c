"""A run's memory snapshot (``run --memory-history``), or why it has none: the figure of
``summarize --view snapshot`` and of the report's memory-snapshot section
(RunAnalysis.memory_snapshot). The replay itself is profiler.trace.snapshot's."""

from __future__ import annotations

from pathlib import Path

import msgspec

from profiler.runs.layout import MEMORY_HISTORY_MAX_ENTRIES, MEMORY_SNAPSHOT
from profiler.runs.result import RunResult
from profiler.trace.snapshot import MEMORY_VIZ, SnapshotView, snapshot_view

#: a CPU run recorded with --memory-history: what it cannot show
CPU_RUN = (
    "no memory snapshot: a CPU run records no allocation history (--memory-history records "
    "the CUDA caching allocator's alone)"
)
#: a GPU run recorded with --memory-history whose snapshot file is gone
MISSING = "no memory snapshot: {path} is missing (the run recorded one)"
#: summarize --view snapshot of a run recorded without it
NOT_RECORDED = (
    "no memory snapshot in {target}: the run was not recorded with --memory-history "
    "(record one on a GPU with `python profile.py run ... --memory-history`)"
)


class MemorySnapshot(msgspec.Struct, kw_only=True):
    """The snapshot replayed (``view``), or, for a run that asked for one and has none (a CPU
    run), why not (``why_none``); ``memory_viz``: where PyTorch's viewer opens the pickle."""

    file: str | None
    view: SnapshotView | None
    why_none: str | None
    memory_viz: str = MEMORY_VIZ


def asked_for(result: RunResult | None) -> bool:
    """Whether the run was recorded with --memory-history."""
    # ConfigRecord is built from RunConfig's fields when imported: no attribute a checker sees
    return result is not None and bool(getattr(result.config, "memory_history", False))


def memory_snapshot(result: RunResult | None, run_folder: Path | None) -> MemorySnapshot | None:
    """The run's snapshot replayed, every stack kept (the views cut them); None for a run
    recorded without --memory-history, and for a bare trace."""
    if run_folder is None or not asked_for(result):
        return None
    assert result is not None  # (asked_for)
    path = run_folder / MEMORY_SNAPSHOT
    for found in (path, path.with_name(MEMORY_SNAPSHOT + ".gz")):  # (or a gzipped copy)
        if found.is_file():
            view = snapshot_view(found, MEMORY_HISTORY_MAX_ENTRIES)
            return MemorySnapshot(file=str(found), view=view, why_none=None)
    on_cpu = not result.device.startswith("cuda")
    return MemorySnapshot(
        file=None, view=None, why_none=CPU_RUN if on_cpu else MISSING.format(path=path)
    )
