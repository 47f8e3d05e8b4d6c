"""Memory over time from a trace recorded with ``run --profile-memory``: the allocator's
``[memory]`` instant events (args Addr, Bytes, Total Allocated, Total Reserved, Device Type,
Device Id) as a curve per device, its peak with the operator that reached it, and a table per
device and operator of what the operators allocated (``memory_view``).

The figures are the ones the PyTorch profiler TensorBoard plugin (torch-tb-profiler 0.4.3)
shows in its Memory view, computed the same way (tests/test_memory_view.py holds them equal
on the committed traces):

- the curve: every record with an address and both totals, in time order, its time in ms since
  the plugin's first event (``first_ts``: the earliest event it reads, the records included),
  Total Allocated and Total Reserved in bytes (the plugin shows them in KiB, which it calls KB);
- the peak: the largest Total Allocated of a device; here also the first record that reached it
  and the operator that record is attributed to;
- the attribution: the CPU operators of each thread form a call tree (nested by time, a parent
  with one child of the same name merged with it, as the plugin and the autograd profiler do);
  a record goes to the innermost node of its thread's tree whose [start, end) holds its
  timestamp. Only a node that is an operator (a ``cpu_op``, not a ProfilerStep, an annotation or
  a module) keeps it: a record whose innermost node is another kind counts nowhere;
- the table, per device and operator name: "Self" columns count the records attributed to the
  operator itself, the others include every operator below it in the tree; Size Increase sums
  Bytes (an allocation is positive, a free negative: a free counts in the operator running when
  it happens, not in the one that allocated the block),
  Allocation Count and Size the positive ones only (frees not subtracted); Calls counts the
  operator's calls the plugin walks (every call on the path to a record, and the calls at the top
  of each thread's tree), not all its calls. An operator nested in another of the same name adds
  its figures to that name twice (the plugin sums each call's including-children figures).

The records are not among the loaded trace's columns (profiler.trace.load keeps complete events
only), so they are read in a pass of their own over the file that decodes instant events only;
the operators come from the loaded Trace's events.
"""

from __future__ import annotations

import bisect
import json
import math
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Union, cast

import msgspec
import numpy as np
import numpy.typing as npt

from profiler.errors import UserError
from profiler.trace.file_bytes import inflated_blocks, is_gzip, read_data
from profiler.trace.memory_records import (
    MemoryCurve,
    MemoryPeak,
    MemoryStep,
    MemoryView,
    OperatorMemory,
)
from profiler.trace.parsed_trace import Trace
from profiler.trace.pieces import TextStream
from profiler.trace.schema import KIND

#: what the view says of a trace without [memory] events
NOT_RECORDED = (
    "{path} holds no [memory] events: the run was not recorded with --profile-memory "
    "(record one with `python profile.py run ... --profile-memory`)"
)

#: operator names the plugin does not count as operators (node.py ExcludeOpName)
_NOT_OPERATORS = ("DataParallel.forward", "DistributedDataParallel.forward")
_COMMUNICATION = frozenset(
    f"{lib}:{op}"
    for lib in ("nccl", "gloo")
    for op in ("broadcast", "reduce", "all_reduce", "all_gather", "reduce_scatter")
)


# ---- the records ----------------------------------------------------------------------------


class _MemoryArgs(msgspec.Struct, gc=False):
    addr: int | None = msgspec.field(name="Addr", default=None)
    bytes: int = msgspec.field(name="Bytes", default=0)
    total_allocated: float = msgspec.field(name="Total Allocated", default=math.nan)
    total_reserved: float = msgspec.field(name="Total Reserved", default=math.nan)
    device_type: int | None = msgspec.field(name="Device Type", default=None)
    device_id: int | None = msgspec.field(name="Device Id", default=None)


class _Instant(msgspec.Struct, gc=False, tag_field="ph", tag="i"):
    name: str = ""
    tid: int | str = 0
    ts: float = math.nan
    args: _MemoryArgs | None = None


_PHASES = tuple("XBEICbneSTpFstfPNODMVvRc()")
_OTHERS = tuple(
    msgspec.defstruct(f"_Other{i}", [], tag_field="ph", tag=ph, gc=False)
    for i, ph in enumerate(_PHASES)
)
BoolArray = npt.NDArray[np.bool_]
_ANY: Any = Union.__getitem__((_Instant, *_OTHERS))
_DECODER = msgspec.json.Decoder(list[_ANY])
_CHUNK_BYTES = 8 << 20
#: µs -> ms as the plugin converts (a factor, so the times are the plugin's to the bit)
_MS_PER_US = 1 / 1e3
_BLOCK_BYTES = 16 << 20


class MemoryRecords(msgspec.Struct):
    """The [memory] events of a trace in time order (file order where times are equal), as
    columns: ``tid`` the thread, ``device`` its name (``CPU``, ``GPU0`` ...; "" for another
    device type), ``addr`` -1 where absent, the totals nan where absent."""

    ts: list[float]
    tid: list[int | str]
    device: list[str]
    addr: list[int]
    bytes: list[int]
    allocated: list[float]
    reserved: list[float]

    def __len__(self) -> int:
        return len(self.ts)


def _device_name(device_type: int | None, device_id: int | None) -> str:
    if device_type == 0:
        return "CPU"
    if device_type == 1:
        return f"GPU{device_id}"
    return ""


def read_records(path: Path) -> MemoryRecords:
    """The [memory] events of the trace at ``path``, in one pass that decodes instant events
    only (pieces of whole events, as the loader cuts them; the whole file decoded untyped where a
    piece does not decode)."""
    found = _fast_records(path)
    if found is None:
        found = _full_records(path)
    order = sorted(range(len(found)), key=lambda i: found[i].ts)  # stable: file order on ties
    events = [found[i] for i in order]
    args = [e.args or _MemoryArgs() for e in events]
    return MemoryRecords(
        ts=[e.ts for e in events],
        tid=[e.tid for e in events],
        device=[_device_name(a.device_type, a.device_id) for a in args],
        addr=[-1 if a.addr is None else a.addr for a in args],
        bytes=[a.bytes for a in args],
        allocated=[a.total_allocated for a in args],
        reserved=[a.total_reserved for a in args],
    )


def _blocks(path: Path) -> Iterator[bytes]:
    if is_gzip(path):
        yield from inflated_blocks(path)
        return
    data = read_data(path)
    for start in range(0, len(data), _BLOCK_BYTES):
        yield bytes(data[start : start + _BLOCK_BYTES])


def _fast_records(path: Path) -> list[_Instant] | None:
    stream = TextStream(_blocks(path))
    found: list[_Instant] = []
    try:
        for chunk in stream.chunks(_CHUNK_BYTES):
            events = _DECODER.decode(b"".join((b"[", chunk, b"]")))
            found += [e for e in events if e.__class__ is _Instant and e.name == "[memory]"]
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    return found if stream.head is not None else None


def _full_records(path: Path) -> list[_Instant]:
    from profiler.trace.file_bytes import read_bytes

    data = read_bytes(path)
    try:
        raw = msgspec.json.decode(data)
    except msgspec.DecodeError:  # NaN literals, bytes that are not UTF-8: as the loader reads them
        try:
            raw = json.loads(data.decode("utf-8", errors="replace"))
        except ValueError as error:
            raise UserError(f"{path}: its [memory] events cannot be read ({error})") from None
    events = raw.get("traceEvents", []) if isinstance(raw, dict) else []
    found: list[_Instant] = []
    for e in events:
        if not (isinstance(e, dict) and e.get("ph") == "i" and e.get("name") == "[memory]"):
            continue
        args = e.get("args") if isinstance(e.get("args"), dict) else {}
        try:
            found.append(
                _Instant(
                    name="[memory]",
                    tid=msgspec.convert(e.get("tid", 0), int | str),
                    ts=msgspec.convert(e.get("ts"), float, strict=False),
                    args=msgspec.convert(args, _MemoryArgs, strict=False),
                )
            )
        except msgspec.ValidationError:  # a value of another type: not a record to read
            continue
    return found


# ---- the figures ------------------------------------------------------------------------------


class _Tree:
    """One thread's call tree: node 0 is the root; per node its name, [start, end), whether
    it is an operator (the plugin's is_operator_node) and its children in time order."""

    def __init__(self) -> None:
        self.name: list[str] = ["CallTreeRoot"]
        self.start: list[float] = [-math.inf]
        self.end: list[float] = [math.inf]
        self.is_op: list[bool] = [False]
        self.children: list[list[int]] = [[]]


def _node_kinds(trace: Trace) -> tuple[BoolArray, BoolArray, BoolArray]:
    """Rows of ``trace.events`` that are nodes of the plugin's call trees, whether each is an
    operator, and whether it is of the plugin's Operator type (merged with a same-name child).
    The names are tested once each, not once per event."""
    events = trace.events
    kind = events["kind"].to_numpy()
    name_id = events["name_id"].to_numpy()
    names = cast(list[str], trace.names.tolist())
    step = _per_name(names, lambda n: n.startswith("ProfilerStep#"))[name_id]
    module = _per_name(names, lambda n: n.startswith("nn.Module: "))[name_id]
    communication = _per_name(names, lambda n: n in _COMMUNICATION)[name_id]
    other_node = _per_name(
        names,
        lambda n: (
            n in _NOT_OPERATORS
            or n.startswith("Optimizer.")
            or (n.startswith("enumerate(DataLoader)#") and n.endswith(".__next__"))
            or n.startswith("enumerate(DataPipe)#")
        ),
    )[name_id]
    cpu_op = kind == KIND["cpu_op"]
    annotation = (kind == KIND["annotation"]) | (kind == KIND["gpu_annotation"])
    node = cpu_op | (annotation & (step | communication)) | ((kind == KIND["python"]) & module)
    plain_op = cpu_op & ~step
    return node, plain_op & ~other_node, plain_op


def _per_name(names: list[str], test: Callable[[str], bool]) -> BoolArray:
    return np.fromiter(map(test, names), dtype=bool, count=len(names))


def _trees(trace: Trace, kinds: tuple[BoolArray, BoolArray, BoolArray]) -> dict[int | str, _Tree]:
    """Each thread's call tree, as the plugin builds it (op_tree.OpTreeBuilder without the
    backward regrouping, which needs a training step)."""
    events = trace.events
    node, is_op, plain_op = kinds
    rows = np.flatnonzero(node)
    ts = events["ts"].to_numpy()[rows]
    end = ts + events["dur"].to_numpy()[rows]
    tids = [_as_int(trace.threads[t][1]) for t in events["thread"].to_numpy()[rows].tolist()]
    names = trace.names[events["name_id"].to_numpy()[rows]].tolist()
    ops = cast(list[bool], is_op[rows].tolist())
    operator_type = cast(list[bool], plain_op[rows].tolist())
    order = np.lexsort((np.arange(len(rows)), -end, ts)).tolist()
    by_tid: dict[int | str, list[int]] = defaultdict(list)
    for i in order:
        by_tid[tids[i]].append(i)
    trees: dict[int | str, _Tree] = {}
    starts, ends = ts.tolist(), end.tolist()
    for tid, members in by_tid.items():
        tree = _Tree()
        same_type: list[bool] = [False]
        stack = [0]
        for i in members:
            s, e = starts[i], ends[i]
            while True:
                top = stack[-1]
                if s < tree.end[top]:
                    if e <= tree.end[top]:  # else: overlaps its parent, left out (as the plugin)
                        index = len(tree.name)
                        tree.name.append(names[i])
                        tree.start.append(s)
                        tree.end.append(e)
                        tree.is_op.append(ops[i])
                        same_type.append(operator_type[i])
                        tree.children.append([])
                        tree.children[top].append(index)
                        stack.append(index)
                    break
                stack.pop()
        _merge_same_name(tree, same_type)
        roots = tree.children[0]
        tree.start[0] = tree.start[roots[0]] if roots else math.nan
        tree.end[0] = tree.end[roots[-1]] if roots else math.nan
        trees[tid] = tree
    return trees


def _merge_same_name(tree: _Tree, operator_type: list[bool]) -> None:
    """A node with one child of its name (both operators) takes the child's children, as the
    plugin's remove_dup_nodes (and the autograd profiler's) do."""
    todo = [0]
    while todo:
        node = todo.pop()
        kids = tree.children[node]
        while (
            len(kids) == 1
            and tree.name[kids[0]] == tree.name[node]
            and operator_type[node]
            and operator_type[kids[0]]
        ):
            kids = tree.children[node] = tree.children[kids[0]]
        todo.extend(kids)


def _attribute(
    records: MemoryRecords, trees: dict[int | str, _Tree]
) -> tuple[dict[int | str, dict[int, list[int]]], dict[int | str, set[int]], list[int], list[int]]:
    """Each record's node, walked as the plugin's MemoryParser.find_memory_nodes walks it:
    per thread, records of operators (node -> record indices), the nodes visited, and the
    operator node of each record and that node's parent (-1: none)."""
    by_tid: dict[int | str, list[int]] = defaultdict(list)
    for i, tid in enumerate(records.tid):
        by_tid[_as_int(tid)].append(i)
    table: dict[int | str, dict[int, list[int]]] = {}
    visited: dict[int | str, set[int]] = {}
    node_of = [-1] * len(records)
    parent_of = [-1] * len(records)
    for tid, indices in by_tid.items():
        tree = trees.get(tid)
        of_node: dict[int, list[int]] = defaultdict(list)
        seen: set[int] = set()
        table[tid], visited[tid] = of_node, seen
        if tree is None:
            continue
        seen.add(0)
        stack: list[tuple[int, int]] = []
        current: int | None = 0
        child = 0
        k = 0
        while k < len(indices):
            ts = records.ts[indices[k]]
            if current is None or math.isnan(tree.start[current]):
                k += 1
                continue
            if ts < tree.start[current]:
                k += 1
                continue
            if ts >= tree.end[current]:
                if stack:
                    current, child = stack.pop()
                    child += 1
                else:
                    current = None
                continue
            kids = tree.children[current]
            while child < len(kids):
                if ts < tree.start[kids[child]]:
                    break
                if ts >= tree.end[kids[child]]:
                    child += 1
                else:
                    seen.add(kids[child])
                    stack.append((current, child))
                    current, child = kids[child], 0
                    kids = tree.children[current]
            if tree.is_op[current]:
                of_node[current].append(indices[k])
                node_of[indices[k]] = current
                parent_of[indices[k]] = stack[-1][0] if stack else -1
            k += 1
    return table, visited, node_of, parent_of


def _as_int(tid: int | str) -> int | str:
    try:
        return int(tid)
    except ValueError:
        return tid


#: per device: self increase, self allocation size, self allocation count, then the three
#: including children (the plugin's MemoryMetrics order)
_Metrics = dict[str, list[int]]


def _operator_rows(
    records: MemoryRecords,
    trees: dict[int | str, _Tree],
    table: dict[int | str, dict[int, list[int]]],
    visited: dict[int | str, set[int]],
) -> list[OperatorMemory]:
    """The plugin's MemorySnapshot.get_memory_statistics over the whole recording."""
    by_name: dict[str, _Metrics] = defaultdict(lambda: defaultdict(lambda: [0] * 6))
    calls: dict[str, int] = defaultdict(int)
    every: dict[str, int] = defaultdict(int)
    for tid, tree in trees.items():
        seen, of_node = visited.get(tid, set()), table.get(tid, {})
        for top in tree.children[0]:
            _walk(tree, top, seen, of_node, records, by_name, calls)
        _count_calls(tree, every)
    rows = []
    for name, devices in by_name.items():
        for device, m in devices.items():
            if any(m):
                rows.append(
                    OperatorMemory(
                        device=device,
                        operator=name,
                        calls=calls[name],
                        calls_in_trace=every[name],
                        size_increase_bytes=m[3],
                        self_size_increase_bytes=m[0],
                        allocation_count=m[5],
                        self_allocation_count=m[2],
                        allocation_size_bytes=m[4],
                        self_allocation_size_bytes=m[1],
                    )
                )
    rows.sort(key=lambda r: (r.device, r.operator))
    return rows


def _count_calls(tree: _Tree, every: dict[str, int]) -> None:
    """Every operator call of ``tree`` (a call merged into its parent of the same name is
    one call, as in the plugin's tree)."""
    todo = list(tree.children[0])
    while todo:
        node = todo.pop()
        if tree.is_op[node]:
            every[tree.name[node]] += 1
        todo.extend(tree.children[node])


def _walk(
    tree: _Tree,
    root: int,
    seen: set[int],
    of_node: dict[int, list[int]],
    records: MemoryRecords,
    by_name: dict[str, _Metrics],
    calls: dict[str, int],
) -> None:
    """traverse_node_memory without recursion: a node's own figures, then its children's added
    to its including-children ones, summed per operator name."""
    totals: dict[int, dict[str, list[int]]] = {}
    # (node, children done): a node is entered, then left once its children are
    stack: list[tuple[int, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        if not done:
            if tree.is_op[node]:
                calls[tree.name[node]] += 1
            if node not in seen:
                continue
            own: dict[str, list[int]] = {}
            if tree.is_op[node]:
                for i in of_node.get(node, []):
                    device = records.device[i]
                    if not device:
                        continue
                    m = own.setdefault(device, [0] * 6)
                    size = records.bytes[i]
                    m[0] += size
                    m[3] += size
                    if size > 0:
                        m[1] += size
                        m[2] += 1
                        m[4] += size
                        m[5] += 1
            totals[node] = own
            stack.append((node, True))
            stack.extend((kid, False) for kid in reversed(tree.children[node]))
            continue
        own = totals[node]
        for kid in tree.children[node]:
            for device, m in totals.pop(kid, {}).items():
                mine = own.setdefault(device, [0] * 6)
                for j in (3, 4, 5):
                    mine[j] += m[j]
        if tree.is_op[node]:
            for device, m in own.items():
                row = by_name[tree.name[node]][device]
                for j in range(6):
                    row[j] += m[j]


def first_ts(trace: Trace, records: MemoryRecords, node: BoolArray) -> float:
    """The plugin's first_ts: the earliest of the events it reads (kernels, copies, memsets,
    operators, ProfilerStep spans, Python functions, the profiler's span, the [memory]
    events; runtime calls only where the trace spells them 'Runtime', as Kineto did in 2021)."""
    events = trace.events
    kind = events["kind"].to_numpy()
    read = np.isin(
        kind, [KIND[k] for k in ("kernel", "memcpy", "memset", "cpu_op", "python", "trace")]
    )
    if trace.categories.get("Runtime"):
        read |= kind == KIND["runtime"]
    read |= node  # (the call trees' nodes: ProfilerStep spans among the annotations)
    ts = events["ts"].to_numpy()[read]
    candidates = [float(ts.min())] if len(ts) else []
    if len(records):
        candidates.append(min(records.ts))
    return min(candidates) if candidates else 0.0


def memory_view(trace: Trace, records: MemoryRecords | None = None) -> MemoryView | None:
    """The memory view of ``trace`` (its [memory] events read from its file unless given);
    None when the trace holds none."""
    if records is None:
        records = read_records(trace.path)
    if not len(records):
        return None
    kinds = _node_kinds(trace)
    start = first_ts(trace, records, kinds[0])
    trees = _trees(trace, kinds)
    table, visited, node_of, parent_of = _attribute(records, trees)
    node_names: dict[int | str, list[str]] = {tid: t.name for tid, t in trees.items()}
    curves: dict[str, MemoryCurve] = {}
    peaks: dict[str, MemoryPeak] = {}
    for i in range(len(records)):
        device = records.device[i]
        allocated, reserved = records.allocated[i], records.reserved[i]
        if records.addr[i] == -1 or math.isnan(allocated) or math.isnan(reserved):
            continue
        curve = curves.get(device)
        if curve is None:
            curve = curves[device] = MemoryCurve(
                device=device, time_ms=[], allocated_bytes=[], reserved_bytes=[]
            )
        time_ms = _MS_PER_US * (records.ts[i] - start)
        curve.time_ms.append(time_ms)
        curve.allocated_bytes.append(int(allocated))
        curve.reserved_bytes.append(int(reserved))
        peak = peaks.get(device)
        if peak is None or allocated > peak.allocated_bytes:
            names = node_names.get(_as_int(records.tid[i]), [])
            allocation = records.bytes[i] > 0  # (the plugin names the operator of these only)
            node, parent = node_of[i], parent_of[i]
            peaks[device] = MemoryPeak(
                device=device,
                allocated_bytes=int(allocated),
                time_ms=time_ms,
                operator=names[node] if allocation and node >= 0 else None,
                parent=names[parent] if allocation and node >= 0 and parent >= 0 else None,
                reserved_bytes=peak.reserved_bytes if peak is not None else 0,
            )
        peaks[device].reserved_bytes = max(peaks[device].reserved_bytes, int(reserved))
    devices = sorted(curves, key=_device_order)
    return MemoryView(
        trace=str(trace.path),
        first_ts_us=start,
        devices=devices,
        peaks=[peaks[d] for d in devices],
        curves=[curves[d] for d in devices],
        steps=_steps(trace, start, [curves[d] for d in devices]),
        operators=_operator_rows(records, trees, table, visited),
        events=len(records),
        attributed_events=sum(1 for n in node_of if n >= 0),
    )


def _steps(trace: Trace, start: float, curves: list[MemoryCurve]) -> list[MemoryStep]:
    """The ProfilerStep spans of the CPU threads, in time order, with each device's peak."""
    events = trace.events
    kind = events["kind"].to_numpy()
    cpu = (kind == KIND["annotation"]) | (kind == KIND["cpu_op"])
    names = cast(list[str], trace.names.tolist())
    step = _per_name(names, lambda n: n.startswith("ProfilerStep#"))[events["name_id"].to_numpy()]
    rows = np.flatnonzero(cpu & step)
    ts = cast(list[float], events["ts"].to_numpy()[rows].tolist())
    dur = cast(list[float], events["dur"].to_numpy()[rows].tolist())
    name_ids = cast(list[int], events["name_id"].to_numpy()[rows].tolist())
    found = []
    for i in sorted(range(len(ts)), key=ts.__getitem__):
        first, last = _MS_PER_US * (ts[i] - start), _MS_PER_US * (ts[i] + dur[i] - start)
        peaks = {}
        for c in curves:
            lo, hi = bisect.bisect_left(c.time_ms, first), bisect.bisect_left(c.time_ms, last)
            if hi > lo:
                peaks[c.device] = max(c.allocated_bytes[lo:hi])
        found.append(
            MemoryStep(
                name=names[name_ids[i]], start_ms=first, end_ms=last, peak_allocated_bytes=peaks
            )
        )
    return found


def _device_order(device: str) -> tuple[int, int | str]:
    """GPUs first by number, then the CPU, then anything else."""
    if device.startswith("GPU") and device[3:].isdigit():
        return (0, int(device[3:]))
    return (1, 0) if device == "CPU" else (2, device)
