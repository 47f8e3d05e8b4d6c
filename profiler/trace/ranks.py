"""One rank's trace of a distributed run: which rank it is (the ``distributedInfo`` Kineto writes
at the head of the file) and, per step, where its time went.

Two readings, side by side:

- the TensorBoard plugin's Distributed view (torch-tb-profiler 0.4.3, ``OverallParser.aggregate``
  and ``DistributedRunGenerator._generate_overlap_graph``): per step, *computation* is the union
  of the kernels that no communication operator launched (of the CPU operators where the trace
  has no kernel), *communication* the union of the nccl:*/gloo:* operators' CPU spans and the
  kernels they launched (by External id), *overlapping* their intersection, and *other* the
  rest of the step; the view shows computation and communication without the overlap, so the
  four add up to the step. Steps are the plugin's (profiler.trace.steps.step_windows with
  ``definitions="plugin"``), as it reads the tb-compat copy of a trace;
- this tool's: *kernel time* is the union of the kernels other than communication kernels,
  *communication time* the union of communication kernels as the category rules name them
  (nccl, all_reduce, ...), or, in a trace without kernels, of the spans of collective operators
  (CPU_COLLECTIVE: gloo:*, nccl:*, c10d::*, _c10d_functional::* with its wait_tensor,
  record_param_comms) on the threads that run the steps (a backend's worker threads, where
  gloo runs its all_reduce while the step's thread waits, are left out); *exposed
  communication* the part of it with no other kernel running (all of it without kernels), and
  *busy* the step without its exposed communication: what a rank spends before it waits for
  the others.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pandas as pd

from profiler.errors import UserError
from profiler.trace.breakdown import role_intervals
from profiler.trace.file_bytes import inflated_blocks, is_gzip, read_data
from profiler.trace.intervals import covered_per_window, covered_regions, merge, merge_mask
from profiler.trace.load import KIND, Trace
from profiler.trace.rules import classify
from profiler.trace.steps import step_windows

#: the key Kineto writes the rank under
DISTRIBUTED_KEY = b'"distributedInfo"'
#: the key after which the header ends
_EVENTS_KEY = b'"traceEvents"'
#: bytes of a plain file read at most to find the header
_HEADER_BYTES = 16 << 20
#: CPU spans of collective operators, where a trace has no kernel (this tool's reading): the
#: backend's own spans, c10d's operators and the functional collectives' (their wait_tensor is
#: where a thread waits for the others)
CPU_COLLECTIVE = re.compile(r"^(?:gloo:|nccl:|c10d::|_c10d_functional::|record_param_comms$)")

#: per-step columns of rank_steps, in µs
PLUGIN_COLUMNS = ("computation_us", "overlapping_us", "communication_us", "other_us")
TOOL_COLUMNS = ("kernel_us", "comm_us", "exposed_comm_us", "busy_us")


@dataclass(frozen=True)
class DistributedInfo:
    """A trace's ``distributedInfo``: its rank, the world's size and the backend."""

    rank: int
    world_size: int | None
    backend: str | None


def distributed_info(path: Path) -> DistributedInfo | None:
    """The rank a trace records in its head (before ``traceEvents``), None where it records
    none; a damaged file gives a one-line error (read_data's)."""
    head = _head(path)
    at = head.find(DISTRIBUTED_KEY)
    events = head.find(_EVENTS_KEY)
    if at < 0 or (0 <= events < at):
        return None
    colon = head.find(b":", at + len(DISTRIBUTED_KEY))
    try:
        value, _ = json.JSONDecoder().raw_decode(
            head[colon + 1 :].decode("utf-8", errors="replace").lstrip()
        )
    except ValueError:
        return None
    if not isinstance(value, dict) or not isinstance(value.get("rank"), int):
        return None
    world = value.get("world_size")
    backend = value.get("backend")
    return DistributedInfo(
        rank=value["rank"],
        world_size=world if isinstance(world, int) else None,
        backend=backend if isinstance(backend, str) else None,
    )


def _head(path: Path) -> bytes:
    """The text of a trace up to its ``traceEvents`` key (or its first 16 MB)."""
    if not is_gzip(path):
        data = read_data(path)
        head = bytes(data[:_HEADER_BYTES])
        return head
    found = b""
    for block in inflated_blocks(path):
        found += block
        if _EVENTS_KEY in found or len(found) >= _HEADER_BYTES:
            break
    return found


def _per_step(
    intervals: tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]],
    lo: npt.NDArray[np.float64],
    hi: npt.NDArray[np.float64],
) -> npt.NDArray[np.float64]:
    """How much of each window [lo, hi] the merged ``intervals`` cover."""
    return covered_per_window(intervals[0], intervals[1], lo, hi)


def intersect(
    a: tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]],
    b: tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]],
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """The intersection of two unions of merged intervals, merged: the regions between the
    bounds of both that each of them covers."""
    (sa, ea), (sb, eb) = a, b
    if not len(sa) or not len(sb):
        return np.array([]), np.array([])
    cuts = np.unique(np.concatenate([sa, ea, sb, eb]))
    both = covered_regions(cuts, sa, ea) & covered_regions(cuts, sb, eb)
    regions = np.flatnonzero(both[:-1])  # region r is [cuts[r], cuts[r + 1]); the last is open
    return merge(cuts[regions], cuts[regions + 1])


def _tool_communication(trace: Trace) -> npt.NDArray[np.bool_]:
    """This tool's communication events: kernels the category rules call communication, or in
    a trace without kernels, spans of collective operators (CPU_COLLECTIVE) on the threads that
    hold the ProfilerStep#N spans (every thread without them)."""
    ev = trace.events
    kind = ev["kind"].to_numpy()
    name_id = ev["name_id"].to_numpy()
    kernel = kind == KIND["kernel"]
    if kernel.any():
        comm_names = np.array(
            [classify(str(n)).category == "communication" for n in trace.names], dtype=bool
        )
        found: npt.NDArray[np.bool_] = kernel & comm_names[name_id]
        return found
    collective = np.array([bool(CPU_COLLECTIVE.match(str(n))) for n in trace.names], dtype=bool)
    cpu: npt.NDArray[np.bool_] = np.isin(kind, [KIND["cpu_op"], KIND["annotation"]])
    is_step = np.array([str(n).startswith("ProfilerStep#") for n in trace.names], dtype=bool)
    thread = ev["thread"].to_numpy()
    step_threads = np.unique(thread[cpu & is_step[name_id]])
    if len(step_threads):
        cpu &= np.isin(thread, step_threads)
    found_cpu: npt.NDArray[np.bool_] = cpu & collective[name_id]
    return found_cpu


def rank_steps(trace: Trace) -> pd.DataFrame:
    """Per step of the plugin's reading: its name, window and µs of the Distributed view's four
    parts (PLUGIN_COLUMNS) and of this tool's figures (TOOL_COLUMNS); ``step_us`` is the
    window's length. No row for a trace without steps or events."""
    steps, _ = step_windows(trace, "plugin")
    columns = ["step", "start", "end", "step_us", *PLUGIN_COLUMNS, *TOOL_COLUMNS]
    if steps.empty:
        return pd.DataFrame(columns=columns)
    lo = steps["start"].to_numpy(dtype=float)
    hi = steps["end"].to_numpy(dtype=float)
    step_us = hi - lo
    ev = trace.events
    none = np.zeros(len(ev), dtype=bool)
    roles = role_intervals(trace, none, "plugin")
    computation = roles["kernel"] if len(roles["kernel"][0]) else roles["cpu_exec"]
    communication = roles["communication"]
    comp = _per_step(computation, lo, hi)
    comm = _per_step(communication, lo, hi)
    overlap = _per_step(intersect(computation, communication), lo, hi)
    ts, dur = ev["ts"].to_numpy(), ev["dur"].to_numpy()
    kind = ev["kind"].to_numpy()
    tool_comm = _tool_communication(trace)
    kernels = merge_mask(ts, dur, (kind == KIND["kernel"]) & ~tool_comm)
    comm_union = merge_mask(ts, dur, tool_comm)
    kernel_us = _per_step(kernels, lo, hi)
    comm_us = _per_step(comm_union, lo, hi)
    exposed = comm_us - _per_step(intersect(kernels, comm_union), lo, hi)
    return pd.DataFrame(
        {
            "step": steps["step"].astype(str).to_numpy(),
            "start": lo,
            "end": hi,
            "step_us": step_us,
            "computation_us": comp - overlap,
            "overlapping_us": overlap,
            "communication_us": comm - overlap,
            "other_us": step_us + overlap - comp - comm,
            "kernel_us": kernel_us,
            "comm_us": comm_us,
            "exposed_comm_us": exposed,
            "busy_us": step_us - exposed,
        },
        columns=columns,
    )


def step_number(step: str) -> int | None:
    """N of ``ProfilerStep#N``; None for another name."""
    found = re.fullmatch(r"ProfilerStep#(\d+)", step)
    return int(found.group(1)) if found else None


def require_rank(path: Path) -> DistributedInfo:
    """distributed_info, or a one-line error for a trace that records no rank."""
    info = distributed_info(path)
    if info is None:
        raise UserError(f"{path} records no rank (no distributedInfo in its head)")
    return info
