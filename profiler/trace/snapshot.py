"""A memory snapshot of ``run --memory-history`` (torch.cuda.memory._snapshot(), pickled in the run
folder as memory_snapshot.pickle): the peak of allocated memory over the recorded history, and the
allocation stacks of the blocks live at that moment, largest first (``snapshot_view``).

The snapshot (torch's format; torch/cuda/memory.py documents it):

- ``segments``: the allocator's state when the snapshot was taken, one entry per cudaMalloc'd
  segment (``device``, ``address``, ``total_size``) with its ``blocks`` (``address``, ``size``,
  ``state``: active_allocated, active_awaiting_free or inactive, and the allocation's
  ``frames`` where it was made while the history was recorded);
- ``device_traces``: per device, the history in order: ``alloc``, ``free_requested``,
  ``free_completed`` (``addr``, ``size``: the block's), ``segment_alloc``/``segment_free`` and,
  with expandable segments, ``segment_map``/``segment_unmap`` (cudaMalloc'd memory), ``oom``,
  ``snapshot``; ``frames`` on the allocations (innermost first), ``time_us`` in torch 2.1 on.

The replay: a block is in use from its ``alloc`` to its ``free_completed`` (after free_requested
the block may still wait for another stream's work: PyTorch's memory_viz counts it until then
too). Blocks made before the history began are found from the history and the final state: a
``free_completed`` with no ``alloc`` before it in the history, and a block still in use at the
end that no ``alloc`` of the history made. Allocated memory at each event is their sizes plus the
history's allocations less its completed frees; the peak is the first event where it is largest.
Reserved memory is the final segments' size less the history's segment changes, replayed the
same way. The blocks live at the peak are grouped by their allocation stack.

A stack is shown as ``file:line name`` frames, innermost first, trimmed as PyTorch's
torch/cuda/_memory_viz.py trims them (the unwinder's and the interpreter's own C++ frames, the
dispatcher's boxing and redispatch frames), and also without nn.Module's call wrappers
(module.py ``_call_impl``, ``_wrapped_call_impl``), which every module call adds. A file is
named from its package (``torch/nn/modules/linear.py``, ``transformers/...``) where it sits in
site-packages, else from ``profiler/`` for this tool's own, else by its name alone.

The file is a pickle: it is read by an unpickler that refuses every class and function (a
snapshot holds only dicts, lists, strings, numbers and tuples), so a file that is not one cannot
run code.
"""

from __future__ import annotations

import io
import pickle
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from profiler.errors import UserError
from profiler.trace.file_bytes import read_bytes

if TYPE_CHECKING:  # numpy loads with the replay: the records (cli/documents.py) need none
    import numpy as np
    import numpy.typing as npt

#: where PyTorch's viewer of a snapshot is (drag and drop the pickle onto the page)
MEMORY_VIZ = "https://pytorch.org/memory_viz"
#: the name of the group of blocks made before the history began (no stack recorded)
BEFORE_HISTORY = "(allocated before the history began: no stack recorded)"

# the frames torch/cuda/_memory_viz.py leaves out of a stack (by function name, by file name)
_OMIT_FUNCTIONS = (
    "unwind::unwind",
    "CapturedTraceback::gather",
    "gather_with_cpp",
    "_start",
    "__libc_start_main",
    "PyEval_",
    "PyObject_",
    "PyFunction_",
)
_OMIT_FILES = (
    "core/boxing",
    "/Register",
    "/Redispatch",
    "pythonrun.c",
    "Modules/main.c",
    "Objects/call.c",
    "Objects/methodobject.c",
    "pycore_ceval.h",
    "ceval.c",
    "cpython/abstract.h",
)
#: nn.Module's call wrappers: one pair per module call, in every stack through a model
_MODULE_WRAPPERS = ("_call_impl", "_wrapped_call_impl")
_PACKAGE_ROOTS = ("site-packages/", "dist-packages/")

_ALLOCATED, _FREED = "alloc", "free_completed"
_SEGMENT_GROWS = ("segment_alloc", "segment_map")
_SEGMENT_SHRINKS = ("segment_free", "segment_unmap")
_IN_USE = ("active_allocated", "active_awaiting_free", "active_pending_free")


# ---- reading --------------------------------------------------------------------------------


class _PlainUnpickler(pickle.Unpickler):
    """Builtin values only: a global (a class, a function) is refused."""

    def find_class(self, module: str, name: str) -> Any:  # noqa: ANN401 (pickle's signature)
        raise pickle.UnpicklingError(f"refused {module}.{name}")


def read_snapshot(path: Path) -> dict[str, Any]:
    """The snapshot pickled at ``path`` (or a gzipped copy of it); a file that is not one is a
    one-line error."""
    data = read_bytes(path)  # (a gzipped copy inflated, a gzip bomb refused)
    try:
        snapshot = _PlainUnpickler(io.BytesIO(data)).load()
    except Exception as error:  # any unpickling failure: a damaged or foreign file
        raise UserError(
            f"{path} is not a memory snapshot of torch.cuda.memory._snapshot() ({error})"
        ) from None
    if (
        not isinstance(snapshot, dict)
        or not isinstance(snapshot.get("segments"), list)
        or not isinstance(snapshot.get("device_traces"), list)
    ):
        raise UserError(
            f"{path} is not a memory snapshot of torch.cuda.memory._snapshot() (no segments "
            "and device_traces)"
        )
    return snapshot


# ---- the records ----------------------------------------------------------------------------


class StackRow(msgspec.Struct, kw_only=True):
    """The blocks live at the peak that one stack allocated: their bytes, their count, their
    share of the allocated memory at the peak, and the stack (``file:line name``, innermost
    first, the frames every stack of the device shares left out: SnapshotDevice.common_frames)."""

    bytes: int
    blocks: int
    share_pct: float
    frames: list[str]


class SnapshotDevice(msgspec.Struct, kw_only=True):
    """One device's history: its events, the allocated memory at the start, the peak and the
    end (bytes), reserved memory at the peak, where the peak is (the event's index in the
    history, its time in µs since the history's first event where torch recorded times), the
    blocks live then, grouped by stack (largest first), and the timeline of allocated and
    reserved memory, one point per allocation or free (a long history thinned to at most
    TIMELINE_POINTS, the peak kept)."""

    device: int
    events: int
    allocations: int
    frees: int
    allocated_at_start_bytes: int
    peak_allocated_bytes: int
    allocated_at_end_bytes: int
    reserved_at_peak_bytes: int
    peak_event: int | None  # None: the history holds no allocation, the peak is the start
    peak_time_us: float | None
    live_blocks: int
    before_history_bytes: int  # live at the peak, made before the history began
    stacks: list[StackRow]
    common_frames: list[str]  # outermost last
    timeline_event: list[int]
    timeline_time_us: list[float] | None
    timeline_allocated_bytes: list[int]
    timeline_reserved_bytes: list[int]


class SnapshotView(msgspec.Struct, kw_only=True):
    """A run's memory snapshot: its file, the devices it recorded, and whether the history
    filled the allocator's ring buffer (``max_entries``: the earliest events were dropped)."""

    path: str
    max_entries: int | None
    truncated: bool
    devices: list[SnapshotDevice]


#: the most points of a device's timeline kept in the view
TIMELINE_POINTS = 2000


# ---- frames ---------------------------------------------------------------------------------


def _kept(frame: dict[str, Any]) -> bool:
    name, filename = str(frame.get("name", "")), str(frame.get("filename", ""))
    if any(omit in name for omit in _OMIT_FUNCTIONS):
        return False
    if any(omit in filename for omit in _OMIT_FILES):
        return False
    return not (name in _MODULE_WRAPPERS and filename.endswith("torch/nn/modules/module.py"))


def short_file(filename: str) -> str:
    """A frame's file as the view names it: from its package in site-packages, from
    ``profiler/`` for this tool's own, else its name alone."""
    for root in _PACKAGE_ROOTS:
        if root in filename:
            return filename.split(root, 1)[1]
    if "/profiler/" in filename:
        return "profiler/" + filename.rsplit("/profiler/", 1)[1]
    return filename.rsplit("/", 1)[-1]


def frame_text(frame: dict[str, Any]) -> str:
    """``file:line name``."""
    where = short_file(str(frame.get("filename", "?")))
    return f"{where}:{frame.get('line', '?')} {frame.get('name', '?')}"


def _stack(
    frames: list[dict[str, Any]] | None, cache: dict[int, tuple[str, ...]]
) -> tuple[str, ...]:
    """The trimmed stack of ``frames`` (innermost first); frames lists torch shares between
    events are formatted once."""
    if not frames:
        return ()
    key = id(frames)
    found = cache.get(key)
    if found is None:
        found = tuple(frame_text(f) for f in frames if _kept(f))
        cache[key] = found
    return found


def _common_outer(stacks: list[tuple[str, ...]]) -> int:
    """How many outermost frames every stack shares (none with fewer than two stacks), leaving
    each at least its innermost frame."""
    if len(stacks) < 2:
        return 0
    shortest = min(len(s) for s in stacks)
    shared = 0
    while shared < shortest - 1 and len({s[len(s) - 1 - shared] for s in stacks}) == 1:
        shared += 1
    return shared


# ---- the replay -----------------------------------------------------------------------------


def _device_of(segment: dict[str, Any]) -> int:
    return int(segment.get("device", 0))


@dataclass
class _Walked:
    """One device's history walked once: the allocations it made (index -> size, stack, the
    index of its completed free), the blocks made before it (size, the index of their free;
    None: still in use at the end), and per event the change of allocated and reserved bytes
    and its time (µs, where torch recorded times)."""

    sizes: dict[int, int] = field(default_factory=dict)
    stacks: dict[int, tuple[str, ...]] = field(default_factory=dict)
    freed_at: dict[int, int] = field(default_factory=dict)
    before: list[tuple[int, int | None]] = field(default_factory=list)
    delta: list[int] = field(default_factory=list)
    reserved: list[int] = field(default_factory=list)
    times: list[float] = field(default_factory=list)


def _walk(trace: list[dict[str, Any]], own: list[dict[str, Any]]) -> _Walked:
    walked = _Walked()
    cache: dict[int, tuple[str, ...]] = {}
    open_at: dict[int, int] = {}  # address -> the index of its allocation still in use
    for i, event in enumerate(trace):
        action = event.get("action")
        size = int(event.get("size", 0))
        if "time_us" in event:
            walked.times.append(float(event["time_us"]))
        moved = grew = 0
        if action == _ALLOCATED:
            walked.sizes[i] = size
            walked.stacks[i] = _stack(event.get("frames"), cache)
            open_at[int(event["addr"])] = i
            moved = size
        elif action == _FREED:
            made = open_at.pop(int(event["addr"]), None)
            if made is None:
                walked.before.append((size, i))
            else:
                walked.freed_at[made] = i
            moved = -size
        elif action in _SEGMENT_GROWS:
            grew = size
        elif action in _SEGMENT_SHRINKS:
            grew = -size
        walked.delta.append(moved)
        walked.reserved.append(grew)
    for segment in own:  # blocks in use at the end that no allocation of the history made
        for block in segment.get("blocks", []):
            if block.get("state") in _IN_USE and int(block["address"]) not in open_at:
                walked.before.append((int(block["size"]), None))
    return walked


def _live_at(
    walked: _Walked, at: int, events: int, peak: int
) -> tuple[list[StackRow], list[str], int, int]:
    """The blocks live after event ``at`` (-1: before the first) grouped by stack, largest
    first; the outer frames every recorded stack shares; the bytes made before the history
    still live; the live blocks."""
    groups: dict[tuple[str, ...], list[int]] = defaultdict(lambda: [0, 0])
    for i, size in walked.sizes.items():
        if i <= at and walked.freed_at.get(i, events) > at:
            groups[walked.stacks[i]][0] += size
            groups[walked.stacks[i]][1] += 1
    before = [size for size, freed in walked.before if freed is None or freed > at]
    with_stacks = [s for s in groups if s]
    shared = _common_outer(with_stacks)
    common = list(with_stacks[0][len(with_stacks[0]) - shared :]) if shared else []
    found = [
        (total, blocks, list(stack[: len(stack) - shared]) if stack else ["(no stack recorded)"])
        for stack, (total, blocks) in groups.items()
    ]
    if before:
        found.append((sum(before), len(before), [BEFORE_HISTORY]))
    rows = [
        StackRow(
            bytes=total, blocks=blocks, share_pct=100 * total / peak if peak else 0.0, frames=frames
        )
        for total, blocks, frames in found
    ]
    rows.sort(key=lambda r: (-r.bytes, -r.blocks, r.frames))
    return rows, common, sum(before), sum(row.blocks for row in rows)


def _replay(
    device: int, trace: list[dict[str, Any]], segments: list[dict[str, Any]], top: int
) -> SnapshotDevice | None:
    import numpy as np

    own = [s for s in segments if _device_of(s) == device]
    if not trace and not own:
        return None
    walked = _walk(trace, own)
    delta = np.array(walked.delta, dtype=np.int64)
    reserved = np.array(walked.reserved, dtype=np.int64)
    start = sum(size for size, _ in walked.before)
    allocated = start + np.cumsum(delta)
    reserved_end = sum(int(s.get("total_size", 0)) for s in own)
    reserved_curve = reserved_end - int(reserved.sum()) + np.cumsum(reserved)
    peak_event: int | None = None
    peak = start
    if len(trace) and int(allocated.max()) > start:
        peak_event = int(np.argmax(allocated))
        peak = int(allocated[peak_event])
    at = -1 if peak_event is None else peak_event
    rows, common, before_bytes, live = _live_at(walked, at, len(trace), peak)
    points = _thinned(np.flatnonzero(delta), peak_event)
    times = walked.times if len(walked.times) == len(trace) else None
    return SnapshotDevice(
        device=device,
        events=len(trace),
        allocations=len(walked.sizes),
        frees=int(np.count_nonzero(delta < 0)),
        allocated_at_start_bytes=start,
        peak_allocated_bytes=peak,
        allocated_at_end_bytes=int(allocated[-1]) if len(trace) else start,
        reserved_at_peak_bytes=int(reserved_curve[at])
        if at >= 0
        else reserved_end - int(reserved.sum()),
        peak_event=peak_event,
        peak_time_us=(times[at] - times[0]) if at >= 0 and times is not None else None,
        live_blocks=live,
        before_history_bytes=before_bytes,
        stacks=rows[:top] if top else rows,
        common_frames=common,
        timeline_event=points,
        timeline_time_us=[times[i] - times[0] for i in points] if times is not None else None,
        timeline_allocated_bytes=[int(allocated[i]) for i in points],
        timeline_reserved_bytes=[int(reserved_curve[i]) for i in points],
    )


def _thinned(moves: npt.NDArray[np.intp], peak_event: int | None) -> list[int]:
    """At most TIMELINE_POINTS of the events that moved allocated memory, evenly spread, the
    first, the last and the peak kept."""
    import numpy as np

    if len(moves) <= TIMELINE_POINTS:
        return [int(i) for i in moves]
    picked = set(moves[np.linspace(0, len(moves) - 1, TIMELINE_POINTS - 1).astype(int)].tolist())
    if peak_event is not None:
        picked.add(peak_event)
    return sorted(int(i) for i in picked)


def snapshot_view(path: Path, max_entries: int | None = None, top: int = 0) -> SnapshotView:
    """The snapshot at ``path`` replayed per device (``top`` stacks each; 0: all);
    ``max_entries``, the cap its history was recorded with, where known."""
    snapshot = read_snapshot(path)
    traces: list[list[dict[str, Any]]] = snapshot["device_traces"]
    segments: list[dict[str, Any]] = snapshot["segments"]
    devices = sorted({*range(len(traces)), *(_device_of(s) for s in segments)})
    found = []
    for device in devices:
        trace = traces[device] if device < len(traces) else []
        replayed = _replay(device, trace, segments, top)
        if replayed is not None:
            found.append(replayed)
    truncated = max_entries is not None and any(len(t) >= max_entries for t in traces)
    return SnapshotView(path=str(path), max_entries=max_entries, truncated=truncated, devices=found)
