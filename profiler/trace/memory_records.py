"""The memory view's figures (profiler.trace.memory computes them from a trace's [memory]
events): plain records with no pandas or numpy behind them, so the --json documents
(profiler.cli.documents) name them without loading the trace floor's tables."""

from __future__ import annotations

import msgspec


class MemoryCurve(msgspec.Struct, kw_only=True):
    """One device's memory over the recording: a point per [memory] event."""

    device: str
    #: ms since the first event of the trace (the plugin's first_ts)
    time_ms: list[float]
    allocated_bytes: list[int]
    reserved_bytes: list[int]


class MemoryPeak(msgspec.Struct, kw_only=True):
    """One device's largest Total Allocated, the first event that reached it, and the operator
    that allocation is attributed to (None: it is attributed to none, the plugin's
    ``<unknown>``)."""

    device: str
    allocated_bytes: int
    time_ms: float
    operator: str | None
    #: the node above that operator in its call tree (an operator, a ProfilerStep span ...):
    #: the plugin's Memory Events table names an allocation of ``aten::empty*`` after it,
    #: ``parent (aten::empty_strided)``
    parent: str | None
    #: the largest Total Reserved of the device
    reserved_bytes: int


class MemoryStep(msgspec.Struct, kw_only=True):
    """One ProfilerStep span of the recording (its CPU side) and each device's largest Total
    Allocated among its [memory] events in it (a device with none in the step left out)."""

    name: str
    #: ms since the first event, as the curves
    start_ms: float
    end_ms: float
    peak_allocated_bytes: dict[str, int]


class OperatorMemory(msgspec.Struct, kw_only=True):
    """One operator name's row of the plugin's Memory view on one device (bytes, counts)."""

    device: str
    operator: str
    #: the plugin's Calls: the calls its walk meets (each call on the way to a [memory] event,
    #: and the outermost calls of each thread), not every call
    calls: int
    #: every call of the operator in the trace's call trees (not the plugin's)
    calls_in_trace: int
    size_increase_bytes: int
    self_size_increase_bytes: int
    allocation_count: int
    self_allocation_count: int
    allocation_size_bytes: int
    self_allocation_size_bytes: int


class MemoryView(msgspec.Struct, kw_only=True):
    """What `summarize --view memory` shows: each device's curve and peak, and the operators'
    table (the plugin's Memory view, same figures)."""

    trace: str
    #: the plugin's first_ts: the curve's time origin, µs as the trace writes it
    first_ts_us: float
    devices: list[str]
    peaks: list[MemoryPeak]
    curves: list[MemoryCurve]
    #: the profiled steps (ProfilerStep spans) and each device's peak in each
    steps: list[MemoryStep]
    operators: list[OperatorMemory]
    #: [memory] events in the trace, and those attributed to an operator
    events: int
    attributed_events: int
