"""run --memory-history: the CUDA caching allocator's history over the profiled window's active
steps (torch.cuda.memory._record_memory_history), kept as torch.cuda.memory._snapshot() pickled
in the run folder (profiler.runs.layout.MEMORY_SNAPSHOT), which PyTorch's memory_viz page opens
and profiler.trace.snapshot reads.

The recording keeps Python stacks only (no C++ frames: symbolizing them takes long and makes the
file several times larger), the allocation's stack alone (not the free's), and at most
MEMORY_HISTORY_MAX_ENTRIES events (the allocator's ring buffer drops the earliest past that).
Only the CUDA caching allocator records a history: on a CPU run nothing is recorded, and the
run says so in one line.
"""

from __future__ import annotations

import pickle
from pathlib import Path

import torch

from profiler.fsutil import write_bytes_atomic
from profiler.runs.layout import MEMORY_HISTORY_MAX_ENTRIES, MEMORY_SNAPSHOT

#: what a CPU run with --memory-history cannot show, said once by the run
NO_CUDA = (
    "--memory-history: a CPU run records no allocation history (the CUDA caching allocator "
    "alone keeps one): no memory snapshot"
)


class Recorder:
    """Starts the recording before the first active step and takes the snapshot after the last
    (``steps``: the step numbers recorded); stopped on every way out of the window (``close``).
    Does nothing when not ``enabled``."""

    def __init__(self, enabled: bool, steps: list[int]) -> None:
        self.enabled = enabled and bool(steps)
        self.first, self.last = (min(steps), max(steps)) if steps else (-1, -1)
        self.recording = False
        self.snapshot: dict | None = None

    def before(self, index: int) -> None:
        if self.enabled and index == self.first:
            torch.cuda.synchronize()  # the earlier steps' frees land before the history begins
            torch.cuda.memory._record_memory_history(
                "all", context="alloc", stacks="python", max_entries=MEMORY_HISTORY_MAX_ENTRIES
            )
            self.recording = True

    def after(self, index: int) -> None:
        if self.recording and index == self.last:
            torch.cuda.synchronize()
            self.snapshot = torch.cuda.memory._snapshot()
            self.close()

    def close(self) -> None:
        if self.recording:
            self.recording = False
            torch.cuda.memory._record_memory_history(None)

    def __enter__(self) -> Recorder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def write(self, folder: Path) -> list[str]:
        """The snapshot pickled into ``folder``; its file name (none without a snapshot)."""
        if self.snapshot is None:
            return []
        write_bytes_atomic(folder / MEMORY_SNAPSHOT, pickle.dumps(self.snapshot))
        return [MEMORY_SNAPSHOT]

    def events(self) -> int:
        """How many events the snapshot's history holds (every device)."""
        if self.snapshot is None:
            return 0
        return sum(len(trace) for trace in self.snapshot.get("device_traces", []))
