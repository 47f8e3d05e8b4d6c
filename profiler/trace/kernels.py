"""Kernel table, category table and Tensor Core shares: pure functions of a parsed Trace."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, SupportsInt, cast

import numpy as np
import numpy.typing as npt
import pandas as pd

from profiler import units
from profiler.trace import graphs
from profiler.trace.load import KIND, Trace
from profiler.trace.occupancy import theoretical_occupancy
from profiler.trace.parsed_trace import KernelLaunch
from profiler.trace.rules import (
    CATEGORIES,
    UNKNOWN,
    YES,
    RunContext,
    classify,
    distinct_short_names,
)

NO_OPERATOR = graphs.NO_OPERATOR

#: the share of kernel time spent in kernels the name rules say use Tensor Cores: a kernel that
#: uses them at all counts whole, so it reads above how busy the tensor pipe was
TC_KERNELS_LABEL = "time in Tensor Core kernels"
#: said once where that share is shown without ncu's tensor-pipe reading beside it
PIPE_BUSY_NOTE = (
    "time in Tensor Core kernels counts a kernel that uses Tensor Cores at all "
    "whole; how busy the tensor pipe was (ncu's sm__pipe_tensor_cycles_active) "
    "is not in a trace: `profile.py ncu` with the run's options measures it, and "
    '`summarize` then shows "tensor pipe busy (ncu)" beside it'
)


def kernel_rows(trace: Trace) -> pd.DataFrame:
    """One row per kernel launch: timing, launch configuration, the operator that launched it
    (through the correlation id of its cudaLaunchKernel / cuLaunchKernelEx call), and the
    theoretical occupancy of its configuration."""
    events = trace.events
    at = np.flatnonzero(events["kind"].to_numpy() == KIND["kernel"])
    launch = trace.launch
    if len(at) and np.array_equal(at, launch.rows):
        # the columns taken at the kernel rows, the launch columns from each kernel's
        # configuration: what events[kernels].join(trace.kernel_launch) gives, built once
        columns = {c: events[c].to_numpy()[at] for c in events.columns}
        columns.update({c: launch.configs[c].to_numpy()[launch.config] for c in launch.configs})
        rows = pd.DataFrame(columns, index=at, copy=False)
    else:
        rows = events.iloc[at].join(trace.kernel_launch, how="left")
    # (the launch columns may be narrower ints: their products in 64 bits, as before)
    rows["threads_per_block"] = _narrow(
        _wide(rows["block_x"]) * _wide(rows["block_y"]) * rows["block_z"]
    )
    rows["blocks"] = _narrow(_wide(rows["grid_x"]) * _wide(rows["grid_y"]) * rows["grid_z"])
    rows["operator_id"] = _narrow(launching_operator(trace, rows))
    if len(at) and np.array_equal(at, launch.rows) and trace.devices:
        rows["theoretical_occupancy_pct"] = _theoretical_of_configs(trace, rows, launch)
    else:
        rows["theoretical_occupancy_pct"] = _theoretical(trace, rows)
    return rows


def _theoretical_of_configs(
    trace: Trace, rows: pd.DataFrame, launch: KernelLaunch
) -> npt.NDArray[np.float64]:
    """_theoretical, computed once per device and launch configuration number (a kernel's
    registers, shared memory and block are its configuration's)."""
    configs = launch.configs
    device = rows["device"].to_numpy().astype(np.int64)
    low = int(device.min())
    key = (device - low) * len(configs) + launch.config
    present = np.zeros(int(key.max()) + 1, dtype=bool)
    present[key] = True
    values = np.full(len(present), np.nan)
    regs, smem = configs["registers_per_thread"].to_numpy(), configs["shared_memory"].to_numpy()
    threads = (
        configs["block_x"].to_numpy().astype(np.int64)
        * configs["block_y"].to_numpy().astype(np.int64)
        * configs["block_z"].to_numpy().astype(np.int64)
    )
    present_keys: npt.NDArray[np.intp] = np.flatnonzero(present)
    for k in cast(list[int], present_keys.tolist()):
        dev, c = divmod(k, len(configs))
        props = trace.devices.get(dev + low) or next(iter(trace.devices.values()))
        result = None
        if regs[c] >= 0 and smem[c] >= 0:
            result = theoretical_occupancy(int(regs[c]), int(smem[c]), int(threads[c]), props)
        values[k] = np.nan if result is None else 100.0 * result.occupancy
    found: npt.NDArray[np.float64] = values[key]
    return found


def _wide(column: pd.Series) -> pd.Series:
    return column.astype(np.int64) if np.issubdtype(column.dtype, np.integer) else column


def _narrow(values: Any) -> Any:
    """int64 ``values`` (a Series or an array) as int32 where they all fit (a kernel row holds
    a few such columns; their values are the same)."""
    array = np.asarray(values)
    if array.dtype != np.int64 or not len(array):
        return values
    if np.iinfo(np.int32).min <= array.min() and array.max() <= np.iinfo(np.int32).max:
        return values.astype(np.int32)
    return values


def launching_operator(trace: Trace, kernels: pd.DataFrame) -> npt.NDArray[np.int64]:
    """name_id of the innermost CPU operator that launched each kernel, or -1.

    kernel --correlation--> runtime or driver launch call --External id--> cpu_op. Driver-API
    launches (cuLaunchKernelEx: cuBLAS nvjet, TensorRT, Triton) count like runtime ones; when
    the launch call is missing the kernel's own External id is used. A launch with no External
    id at all (ONNX Runtime's, under a record_function that pushes no correlation: seen on an
    H100 with torch 2.11) goes to the innermost operator or annotation enclosing the launch call
    on its CPU thread, step spans (ProfilerStep#N) left out."""
    events = trace.events
    linked = launch_rows(trace, kernels["correlation"].to_numpy())
    launched = linked >= 0
    ext = np.where(launched, events["external_id"].to_numpy()[linked], -1).astype(np.int64)
    ext = np.where(ext >= 0, ext, kernels["external_id"].to_numpy())

    found = operators_of_external(trace, ext)
    if trace.graphs is not None and len(trace.graphs.operator_of_row):
        # kernels replayed from a CUDA graph: the operator that launched them at capture
        replayed = trace.graphs.operator_of_row.reindex(kernels.index.to_numpy()).to_numpy()
        known = ~np.isnan(replayed)
        found[known] = replayed[known].astype(np.int64)
    orphan = (found < 0) & launched
    if orphan.any():
        ops = events.loc[
            events["kind"].isin([KIND["cpu_op"], KIND["annotation"]]),
            ["kind", "name_id", "external_id", "thread", "ts", "dur"],
        ]
        steps = np.char.startswith(trace.names.astype(str), "ProfilerStep#")
        ops = ops[~steps[ops["name_id"].to_numpy()]]
        found[orphan] = _enclosing_op(
            ops,
            events["thread"].to_numpy()[linked[orphan]],
            events["ts"].to_numpy()[linked[orphan]],
        )
    return found


def operators_of_external(
    trace: Trace, external: npt.NDArray[np.integer[Any]]
) -> npt.NDArray[np.int64]:
    """name_id of the CPU operator (or record_function range) carrying each External id, an
    operator winning over a range that shares its id, the first of each where several do
    (graphs.operator_of_external's mapping, as ``pd.Series(external).map(...)`` reads it), or
    -1: found by a sorted search, not a pandas index over every operator."""
    ev = trace.events
    kind, ids, names = (ev[c].to_numpy() for c in ("kind", "external_id", "name_id"))
    found = np.full(len(external), -1, dtype=np.int64)
    asked = external >= 0
    for k in (KIND["annotation"], KIND["cpu_op"]):  # an operator wins: it is written last
        keys, rows = _first_rows(ids, (kind == k) & (ids >= 0))
        if not len(keys):
            continue
        at = np.clip(np.searchsorted(keys, external), 0, len(keys) - 1)
        hit = asked & (keys[at] == external)
        found[hit] = names[rows[at[hit]]]
    return found


def _first_rows(
    values: npt.NDArray[np.integer[Any]], where: npt.NDArray[np.bool_]
) -> tuple[npt.NDArray[np.integer[Any]], npt.NDArray[np.signedinteger[Any]]]:
    """The distinct ``values`` of the rows ``where`` holds, sorted, and the first row of each.
    (A trace numbers its operators in the order it writes them: already sorted, no sort.)"""
    rows = np.flatnonzero(where)
    if len(values) < 2**31:
        rows = rows.astype(np.int32)
    keys = values[rows]
    if len(keys) > 1 and (keys[1:] < keys[:-1]).any():
        order = np.argsort(keys, kind="stable")  # (stable: a repeated value's first row first)
        rows, keys = rows[order], keys[order]
        del order
    once = np.ones(len(keys), dtype=bool)
    once[1:] = keys[1:] != keys[:-1]
    return keys[once], rows[once]


def launch_rows(trace: Trace, correlation: npt.NDArray[np.integer[Any]]) -> npt.NDArray[np.int64]:
    """The row in ``trace.events`` of the runtime or driver call with each ``correlation``
    (the first, where several share one), or -1 (none, or a correlation below 0)."""
    return launch_table(trace).rows_of(correlation)


@dataclass(frozen=True)
class LaunchTable:
    """The runtime and driver calls by correlation: ``keys`` sorted, the row of each key's
    first call in ``rows``; ``repeated`` when several calls share a correlation."""

    keys: npt.NDArray[np.integer[Any]]
    rows: npt.NDArray[np.int64]
    repeated: bool

    def rows_of(self, correlation: npt.NDArray[np.integer[Any]]) -> npt.NDArray[np.int64]:
        """The row of the first call with each ``correlation``, or -1."""
        if not len(self.keys):
            return np.full(len(correlation), -1, dtype=np.int64)
        at = np.clip(np.searchsorted(self.keys, correlation), 0, len(self.keys) - 1)
        found: npt.NDArray[np.int64] = np.where(
            (self.keys[at] == correlation) & (correlation >= 0), self.rows[at], -1
        )
        return found


def launch_table(trace: Trace) -> LaunchTable:
    ev = trace.events
    kind, corr = ev["kind"].to_numpy(), ev["correlation"].to_numpy()
    calls = ((kind == KIND["runtime"]) | (kind == KIND["driver"])) & (corr >= 0)
    keys, rows = _first_rows(corr, calls)
    return LaunchTable(keys, rows.astype(np.int64), repeated=len(keys) < int(calls.sum()))


def _enclosing_op(
    ops: pd.DataFrame, threads: npt.NDArray[np.integer[Any]], times: npt.NDArray[np.float64]
) -> npt.NDArray[np.int64]:
    """name_id of the innermost of ``ops`` on each thread whose span holds each time, or -1.
    Spans on one thread nest, so the innermost is the latest-starting one that has not ended,
    found by walking up from the latest start before the time."""
    found = np.full(len(times), -1, dtype=np.int64)
    for thread, spans in ops.groupby("thread"):
        spans = spans.sort_values(["ts", "dur"], ascending=[True, False], kind="stable")
        starts, ends = spans["ts"].to_numpy(), (spans["ts"] + spans["dur"]).to_numpy()
        parent = _parents(starts, ends)
        names = spans["name_id"].to_numpy()
        for i in np.flatnonzero(threads == thread):
            j = int(np.searchsorted(starts, times[i], side="right")) - 1
            while j >= 0 and ends[j] < times[i]:
                j = parent[j]
            found[i] = names[j] if j >= 0 else -1
    return found


def _parents(
    starts: npt.NDArray[np.float64], ends: npt.NDArray[np.float64]
) -> npt.NDArray[np.int64]:
    """Index of the span enclosing each span (sorted by start, longest first), or -1."""
    parent = np.full(len(starts), -1, dtype=np.int64)
    stack: list[int] = []
    for i in range(len(starts)):
        while stack and ends[stack[-1]] < starts[i]:
            stack.pop()
        parent[i] = stack[-1] if stack else -1
        stack.append(i)
    return parent


def _theoretical(trace: Trace, rows: pd.DataFrame) -> npt.NDArray[np.float64]:
    """Theoretical occupancy % of each launch, computed once per distinct configuration."""
    if not len(rows) or not trace.devices:
        return np.full(len(rows), np.nan)
    keys = ["device", "registers_per_thread", "shared_memory", "threads_per_block"]
    configs = rows[keys].drop_duplicates().reset_index(drop=True)
    values = []
    for device, regs, smem, threads in configs.itertuples(index=False):
        props = trace.devices.get(int(device)) or next(iter(trace.devices.values()))
        result = None
        if regs >= 0 and smem >= 0:
            result = theoretical_occupancy(int(regs), int(smem), int(threads), props)
        values.append(np.nan if result is None else 100.0 * result.occupancy)
    configs["theoretical"] = values
    theoretical: npt.NDArray[np.float64] = (
        rows[keys].merge(configs, on=keys, how="left")["theoretical"].to_numpy()
    )
    return theoretical


def _weighted_mean(values: pd.Series, weights: pd.Series, groups: pd.Series) -> pd.Series:
    valid = values.notna() & (values >= 0)
    w = weights.where(valid, 0.0)
    num = (values.fillna(0.0) * w).groupby(groups).sum()
    den = w.groupby(groups).sum()
    return (num / den).where(den > 0)


@dataclass
class KernelSummary:
    #: one row per kernel name, sorted by total time
    table: pd.DataFrame
    #: one row per category
    categories: pd.DataFrame
    total_kernel_us: float
    tensor_core_us: float
    tensor_core_unknown_us: float
    matrix_us: float  # GEMM + convolution
    matrix_tensor_core_us: float
    notes: list[str] = field(default_factory=list)

    @property
    def tensor_core_share(self) -> float:
        return self.tensor_core_us / self.total_kernel_us if self.total_kernel_us else 0.0

    @property
    def tensor_core_share_of_matrix(self) -> float:
        return self.matrix_tensor_core_us / self.matrix_us if self.matrix_us else 0.0


KERNEL_TABLE_COLUMNS = (
    "kernel",
    "name",
    "category",
    "calls",
    "total_us",
    "mean_us",
    "median_us",
    "min_us",
    "max_us",
    "share_pct",
    "tensor_core",
    "tensor_core_rule",
    "registers_per_thread",
    "shared_memory_bytes",
    "block",
    "grid",
    "blocks_per_sm",
    "warps_per_sm",
    "kineto_est_occupancy_pct",
    "theoretical_occupancy_pct",
    "launch_configs",
    "top_operator",
)


#: the columns of kernel_rows that kernel_summary reads: a subset of kernel rows to summarize
#: (a generation phase's) needs no others
SUMMARY_COLUMNS = (
    "name_id",
    "dur",
    "registers_per_thread",
    "shared_memory",
    "block_x",
    "block_y",
    "block_z",
    "grid_x",
    "grid_y",
    "grid_z",
    "blocks_per_sm",
    "warps_per_sm",
    "kineto_occupancy_pct",
    "theoretical_occupancy_pct",
    "operator_id",
)

#: the columns of the category table, in order
_CATEGORY_COLUMNS = [
    "category",
    "kernels",
    "calls",
    "total_us",
    "share_pct",
    "tensor_core_us",
    "tensor_core_pct",
]

#: the columns that make a kernel's launch configuration
_CONFIG_COLUMNS = [
    "registers_per_thread",
    "shared_memory",
    "block_x",
    "block_y",
    "block_z",
    "grid_x",
    "grid_y",
    "grid_z",
]


def kernel_summary(
    trace: Trace, rows: pd.DataFrame | None = None, context: RunContext | None = None
) -> KernelSummary:
    """The kernel and category tables; ``context`` (the run's precision) decides kernels whose
    names carry no data type (rules.CONTEXT_RULES)."""
    rows = kernel_rows(trace) if rows is None else rows
    if rows.empty:
        empty = pd.DataFrame(columns=list(KERNEL_TABLE_COLUMNS))
        cats = pd.DataFrame(columns=_CATEGORY_COLUMNS)
        return KernelSummary(
            empty, cats, 0.0, 0.0, 0.0, 0.0, 0.0, notes=["no GPU kernels in this trace"]
        )
    total = float(rows["dur"].sum())
    table = _kernel_table(trace, rows, total, context)

    tc_time = table.loc[table["tensor_core"] == YES, "total_us"].sum()
    unknown_time = table.loc[table["tensor_core"] == UNKNOWN, "total_us"].sum()
    matrix = table["category"].isin(["GEMM", "convolution"])
    matrix_time = table.loc[matrix, "total_us"].sum()
    matrix_tc = table.loc[matrix & (table["tensor_core"] == YES), "total_us"].sum()

    return KernelSummary(
        table=table,
        categories=_category_table(table, total),
        total_kernel_us=total,
        tensor_core_us=float(tc_time),
        tensor_core_unknown_us=float(unknown_time),
        matrix_us=float(matrix_time),
        matrix_tensor_core_us=float(matrix_tc),
        notes=_summary_notes(rows, total, unknown_time),
    )


def _kernel_table(
    trace: Trace, rows: pd.DataFrame, total: float, context: RunContext | None
) -> pd.DataFrame:
    """One row per kernel name, the most time first."""
    group = rows["name_id"]
    dur = rows["dur"]
    stats = dur.groupby(group).agg(["count", "sum", "mean", "median", "min", "max"])

    # the launch configuration that took the most time stands for the kernel
    by_config = _sums_by(rows, ["name_id"] + _CONFIG_COLUMNS, sort=False)
    n_configs = by_config.groupby("name_id").size()
    main = (
        by_config.sort_values("dur", ascending=False)
        .drop_duplicates("name_id")
        .set_index("name_id")
    )

    op_time = (
        _sums_by(rows, ["name_id", "operator_id"], sort=True)
        .sort_values("dur", ascending=False)
        .drop_duplicates("name_id")
        .set_index("name_id")
    )

    def weighted(column: str) -> Any:
        return _weighted_mean(rows[column], dur, group).loc[stats.index].to_numpy()

    names = trace.names[stats.index.to_numpy()]
    classes = [classify(n, context) for n in names]
    table = pd.DataFrame(
        {
            "kernel": distinct_short_names(names),
            "name": names,
            "category": [c.category for c in classes],
            "calls": stats["count"].to_numpy(),
            "total_us": stats["sum"].to_numpy(),
            "mean_us": stats["mean"].to_numpy(),
            "median_us": stats["median"].to_numpy(),
            "min_us": stats["min"].to_numpy(),
            "max_us": stats["max"].to_numpy(),
            "share_pct": 100.0 * stats["sum"].to_numpy() / total if total else 0.0,
            "tensor_core": [c.tensor_core for c in classes],
            "tensor_core_rule": [c.tensor_core_rule for c in classes],
            "tensor_core_why": [c.tensor_core_why for c in classes],
            "registers_per_thread": main.loc[stats.index, "registers_per_thread"].to_numpy(),
            "shared_memory_bytes": main.loc[stats.index, "shared_memory"].to_numpy(),
            "block": [_dim(main.loc[i, ["block_x", "block_y", "block_z"]]) for i in stats.index],
            "grid": [_dim(main.loc[i, ["grid_x", "grid_y", "grid_z"]]) for i in stats.index],
            "blocks_per_sm": weighted("blocks_per_sm"),
            "warps_per_sm": weighted("warps_per_sm"),
            "kineto_est_occupancy_pct": weighted("kineto_occupancy_pct"),
            "theoretical_occupancy_pct": weighted("theoretical_occupancy_pct"),
            "launch_configs": n_configs.loc[stats.index].to_numpy(),
            "top_operator": [_op_name(trace, op_time.loc[i, "operator_id"]) for i in stats.index],
        }
    )
    return table.sort_values("total_us", ascending=False, kind="stable").reset_index(drop=True)


def _sums_by(rows: pd.DataFrame, keys: list[str], sort: bool) -> pd.DataFrame:
    """``rows.groupby(keys, sort=sort)["dur"].sum().reset_index()``, grouped by one int64
    number per row that spells the keys out (each key's value less its least, in mixed radix):
    the same groups in the same order and the same sums (pandas is handed the same group of
    each row), without factorizing every key of every row. The several keys where their
    ranges do not fit in 63 bits."""
    combined = np.zeros(len(rows), dtype=np.int64)
    size = 1
    for key in keys:
        values = rows[key].to_numpy()
        low = int(values.min()) if len(values) else 0
        span = (int(values.max()) - low + 1) if len(values) else 1
        size *= span
        if size >= 2**62:
            return rows.groupby(keys, sort=sort)["dur"].sum().reset_index()
        combined *= span
        combined += values.astype(np.int64) - low
    sums = rows["dur"].groupby(combined, sort=sort).sum()
    # the keys of each group from its first row (the groups' order is sums' order)
    codes, _ = pd.factorize(combined, sort=sort)
    first = np.full(len(sums), len(rows), dtype=np.int64)
    np.minimum.at(first, codes, np.arange(len(rows)))
    found = {key: rows[key].to_numpy()[first] for key in keys}
    found["dur"] = sums.to_numpy()
    return pd.DataFrame(found)


def _category_table(table: pd.DataFrame, total: float) -> pd.DataFrame:
    """The kernel table summed per category, the most time first."""
    cat = (
        table.assign(tc_us=table["total_us"].where(table["tensor_core"] == YES, 0.0))
        .groupby("category")
        .agg(
            kernels=("name", "size"),
            calls=("calls", "sum"),
            total_us=("total_us", "sum"),
            tensor_core_us=("tc_us", "sum"),
        )
    )
    cat = cat.reindex([c for c in CATEGORIES if c in cat.index]).reset_index()
    cat["share_pct"] = 100.0 * cat["total_us"] / total if total else 0.0
    cat["tensor_core_pct"] = np.where(
        cat["total_us"] > 0, 100.0 * cat["tensor_core_us"] / cat["total_us"], 0.0
    )
    return cat.sort_values("total_us", ascending=False).reset_index(drop=True)[_CATEGORY_COLUMNS]


def _summary_notes(rows: pd.DataFrame, total: float, unknown_time: float) -> list[str]:
    """What a reader of the kernel tables should know: unknown Tensor Core use, Kineto's zero
    occupancy for kernels with large shared memory."""
    notes = []
    if unknown_time > 0:
        notes.append(
            f"{units.percent(100 * unknown_time / total, 2)} of kernel time is in kernels whose "
            "names do not tell whether they use Tensor Cores (counted as not)"
        )
    over_48k = (rows["shared_memory"] > 48 * 1024) & (rows["kineto_occupancy_pct"] == 0)
    if over_48k.any():
        share = 100 * rows.loc[over_48k, "dur"].sum() / total
        notes.append(
            f"Kineto's est. occupancy reads 0 for kernels with > 48 KB shared memory "
            f"({units.percent(share)} of kernel time); the theoretical column does not"
        )
    return notes


def _dim(values: Iterable[SupportsInt]) -> str:
    x, y, z = (int(v) for v in values)
    return f"{x}x{y}x{z}" if (y, z) != (1, 1) else str(x)


def _op_name(trace: Trace, op: SupportsInt) -> str:
    op_id = int(op)
    return NO_OPERATOR if op_id < 0 else str(trace.names[op_id])
