"""Kernel-level diff of two trace Summaries, A (before) and B (after): pure functions that
return DataFrames.

Every time is µs per profiled step (a trace's totals divided by its number of steps), so traces
that recorded different numbers of steps compare fairly. ``delta_us = B - A``: negative means B
spends less time there (faster in B).

Four views, from coarse to fine:

- overview: step time, kernel time, GPU busy time and utilization, launches, time in Tensor
  Core kernels;
- categories: kernel time per category (GEMM, convolution, elementwise ...);
- operators: kernel time attributed to the CPU operator that launched it (the innermost one;
  TensorRT kernels attribute to ``tensorrt::execute_engine``, Inductor's to its Triton kernels
  or to the compiled graph's span);
- kernels: matched by full kernel name; a kernel on one side only is listed with the other
  side's time as 0, so the deltas of every view sum to the difference of the totals.

Eager and TensorRT runs usually share no kernel name at all; then only the category and operator
views say what changed.

Two CPU runs (traces without GPU activity) have no kernels: their diff is the CPU operators',
matched by name (calls, self and total CPU µs per step), and the overview's rows are the CPU's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, TypeVar

import msgspec
import numpy as np
import pandas as pd

from profiler.trace.diff_rows import (
    CategoryRow,
    Change,
    CpuOperatorChange,
    CpuOperatorRow,
    DiffRow,
    DiffTables,
    KernelChange,
    KernelRow,
    OperatorChange,
    OperatorRow,
    OverviewRow,
)
from profiler.trace.kernels import NO_OPERATOR, PIPE_BUSY_NOTE, TC_KERNELS_LABEL
from profiler.trace.rules import distinct_short_names
from profiler.trace.summary import Summary, json_safe

BOTH, ONLY_A, ONLY_B = "both", "only A", "only B"


def steps_of(summary: Summary) -> int:
    """Number of profiled steps a trace's kernels belong to (1 when it has no step spans)."""
    o = summary.overview
    return max(len(o.steps) + o.dropped_tail_steps, 1)


def _change(a: float | None, b: float | None) -> float:
    if a is None or b is None or not np.isfinite(a) or not np.isfinite(b) or a == 0:
        return float("nan")
    return float(100.0 * (b - a) / a)


def _gpu(summary: Summary, what: str) -> float:
    devices = summary.overview.devices
    if not devices:
        return float("nan")
    if what == "busy":
        return float(sum(d.busy_us for d in devices))
    return float(np.mean([d.gpu_utilization_pct for d in devices]))


def on_cpu(a: Summary, b: Summary) -> bool:
    """Neither trace recorded GPU activity: two CPU runs."""
    return not a.overview.has_gpu and not b.overview.has_gpu


def _cpu_ops(summary: Summary) -> pd.DataFrame:
    """The trace's CPU operators and ranges by name (calls, total and self CPU µs), summed."""
    ops = summary.overview.operators
    cols = ["calls", "cpu_total_us", "cpu_self_us"]
    if not len(ops):
        return pd.DataFrame(columns=cols)
    ops = ops[ops["operator"] != NO_OPERATOR]
    return ops.groupby("operator")[cols].sum()


def overview_diff(a: Summary, b: Summary) -> pd.DataFrame:
    """One row per headline metric: metric, unit, a, b, delta (b - a), change_pct. Two CPU runs
    get the CPU's rows (operator self time, calls, distinct operators), no kernel rows."""
    na, nb = steps_of(a), steps_of(b)
    if on_cpu(a, b):
        oa, ob = _cpu_ops(a), _cpu_ops(b)
        rows = [
            ("profiled steps", "", na, nb),
            ("mean step time", "µs", a.overview.mean_step_us, b.overview.mean_step_us),
            (
                "CPU operator self time per step",
                "µs",
                float(oa["cpu_self_us"].sum()) / na,
                float(ob["cpu_self_us"].sum()) / nb,
            ),
            (
                "CPU operator calls per step",
                "",
                float(oa["calls"].sum()) / na,
                float(ob["calls"].sum()) / nb,
            ),
            ("distinct CPU operators", "", len(oa), len(ob)),
        ]
    else:
        rows = _gpu_rows(a, b, na, nb)
    return _overview_frame(rows)


def _gpu_rows(a: Summary, b: Summary, na: int, nb: int) -> list[tuple[Any, ...]]:
    ka, kb = a.kernels, b.kernels
    return [
        ("profiled steps", "", na, nb),
        ("mean step time", "µs", a.overview.mean_step_us, b.overview.mean_step_us),
        ("kernel time per step", "µs", ka.total_kernel_us / na, kb.total_kernel_us / nb),
        ("GPU busy time per step", "µs", _gpu(a, "busy") / na, _gpu(b, "busy") / nb),
        ("GPU utilization", "%", _gpu(a, "util"), _gpu(b, "util")),
        ("kernel launches per step", "", _calls(a) / na, _calls(b) / nb),
        ("distinct kernels", "", len(ka.table), len(kb.table)),
        (TC_KERNELS_LABEL, "%", 100 * ka.tensor_core_share, 100 * kb.tensor_core_share),
        (
            "GEMM + conv time in Tensor Core kernels",
            "%",
            100 * ka.tensor_core_share_of_matrix,
            100 * kb.tensor_core_share_of_matrix,
        ),
    ]


def _overview_frame(rows: list[tuple[Any, ...]]) -> pd.DataFrame:
    frame = pd.DataFrame(rows, columns=["metric", "unit", "a", "b"])
    frame["a"] = frame["a"].astype(float)
    frame["b"] = frame["b"].astype(float)
    frame["delta"] = frame["b"] - frame["a"]
    # percentages change in points (the delta); a relative change of a share says little
    frame["change_pct"] = [
        float("nan") if unit == "%" else _change(x, y)
        for x, y, unit in zip(frame["a"], frame["b"], frame["unit"])
    ]
    return frame


def _calls(summary: Summary) -> float:
    table = summary.kernels.table
    return float(table["calls"].sum()) if len(table) else 0.0


def _finish(frame: pd.DataFrame) -> pd.DataFrame:
    frame["delta_us"] = frame["us_b"] - frame["us_a"]
    frame["change_pct"] = [
        _change(x, y) if x > 0 else float("nan") for x, y in zip(frame["us_a"], frame["us_b"])
    ]
    order = frame["delta_us"].abs().sort_values(ascending=False, kind="stable").index
    return frame.loc[order].reset_index(drop=True)


def category_diff(a: Summary, b: Summary) -> pd.DataFrame:
    """Kernel time per category on each side: us_a, us_b, delta_us, share of each side's kernel
    time, and the time in Tensor Core kernels of each category on each side."""
    na, nb = steps_of(a), steps_of(b)
    cols = ["category", "total_us", "share_pct", "tensor_core_pct", "calls"]
    ca = a.kernels.categories.reindex(columns=cols).set_index("category")
    cb = b.kernels.categories.reindex(columns=cols).set_index("category")
    names = list(dict.fromkeys([*ca.index, *cb.index]))
    frame = pd.DataFrame({"category": names})
    frame["us_a"] = ca["total_us"].reindex(names).fillna(0.0).to_numpy() / na
    frame["us_b"] = cb["total_us"].reindex(names).fillna(0.0).to_numpy() / nb
    frame["share_a_pct"] = ca["share_pct"].reindex(names).fillna(0.0).to_numpy()
    frame["share_b_pct"] = cb["share_pct"].reindex(names).fillna(0.0).to_numpy()
    frame["tensor_core_a_pct"] = ca["tensor_core_pct"].reindex(names).to_numpy(dtype=float)
    frame["tensor_core_b_pct"] = cb["tensor_core_pct"].reindex(names).to_numpy(dtype=float)
    frame["calls_a"] = ca["calls"].reindex(names).fillna(0).to_numpy(dtype=float) / na
    frame["calls_b"] = cb["calls"].reindex(names).fillna(0).to_numpy(dtype=float) / nb
    return _finish(frame)


def kernel_diff(a: Summary, b: Summary) -> pd.DataFrame:
    """Every kernel of both sides, matched by full name: side (both / only A / only B), short
    name, category, calls and µs per step on each side, delta."""
    na, nb = steps_of(a), steps_of(b)
    cols = ["name", "kernel", "category", "calls", "total_us", "tensor_core"]
    ta = a.kernels.table.reindex(columns=cols).set_index("name")
    tb = b.kernels.table.reindex(columns=cols).set_index("name")
    names = list(dict.fromkeys([*ta.index, *tb.index]))
    in_a, in_b = ta.index, tb.index
    frame = pd.DataFrame({"name": names})
    frame["side"] = [
        BOTH if n in in_a and n in in_b else ONLY_A if n in in_a else ONLY_B for n in names
    ]
    both = ta.combine_first(tb).reindex(names)  # A's description wins where both have one
    frame["kernel"] = distinct_short_names(names)
    frame["category"] = both["category"].to_numpy()
    frame["tensor_core"] = both["tensor_core"].to_numpy()
    frame["calls_a"] = ta["calls"].reindex(names).fillna(0).to_numpy(dtype=float) / na
    frame["calls_b"] = tb["calls"].reindex(names).fillna(0).to_numpy(dtype=float) / nb
    frame["us_a"] = ta["total_us"].reindex(names).fillna(0.0).to_numpy(dtype=float) / na
    frame["us_b"] = tb["total_us"].reindex(names).fillna(0.0).to_numpy(dtype=float) / nb
    return _finish(frame)[list(KernelRow.__struct_fields__)]  # the typed row's order


def cpu_operator_diff(a: Summary, b: Summary) -> pd.DataFrame:
    """Every CPU operator (and record_function range) of both sides, matched by name: side,
    calls, self and total CPU µs per step on each side; ``us_a``/``us_b`` and the delta are
    the self time (the operator's own, its children's left out), sorted by |delta|."""
    na, nb = steps_of(a), steps_of(b)
    oa, ob = _cpu_ops(a), _cpu_ops(b)
    names = list(
        dict.fromkeys(
            [
                *oa.sort_values("cpu_self_us", ascending=False).index,
                *ob.sort_values("cpu_self_us", ascending=False).index,
            ]
        )
    )
    frame = pd.DataFrame({"operator": names})
    frame["side"] = [
        BOTH if n in oa.index and n in ob.index else ONLY_A if n in oa.index else ONLY_B
        for n in names
    ]
    for side, ops, n in (("a", oa, na), ("b", ob, nb)):
        frame[f"calls_{side}"] = ops["calls"].reindex(names).fillna(0).to_numpy(float) / n
        frame[f"total_{side}_us"] = (
            ops["cpu_total_us"].reindex(names).fillna(0.0).to_numpy(float) / n
        )
        frame[f"us_{side}"] = ops["cpu_self_us"].reindex(names).fillna(0.0).to_numpy(float) / n
    frame = _finish(frame)
    frame["total_delta_us"] = frame["total_b_us"] - frame["total_a_us"]
    return frame[list(CpuOperatorRow.__struct_fields__)]  # the typed row's order


def operator_diff(a: Summary, b: Summary) -> pd.DataFrame:
    """Kernel time per launching CPU operator on each side (operators that launched no kernel
    are left out; kernels with no operator go to '(no operator)')."""
    na, nb = steps_of(a), steps_of(b)

    def launched(summary: Summary) -> pd.DataFrame:
        ops = summary.overview.operators
        if not len(ops):
            return pd.DataFrame(columns=["kernels", "kernel_us"])
        ops = ops[ops["kernel_us"] > 0].groupby("operator")[["kernels", "kernel_us"]].sum()
        # kernels attributed to an operator the table left out (e.g. a ProfilerStep span)
        rest = summary.kernels.total_kernel_us - float(ops["kernel_us"].sum())
        if rest > 1e-6 * max(summary.kernels.total_kernel_us, 1.0):
            extra = pd.DataFrame({"kernels": [0], "kernel_us": [rest]}, index=[NO_OPERATOR])
            ops = pd.concat([ops, extra]).groupby(level=0).sum()
        return ops

    oa, ob = launched(a), launched(b)
    names = list(
        dict.fromkeys(
            [
                *oa.sort_values("kernel_us", ascending=False).index,
                *ob.sort_values("kernel_us", ascending=False).index,
            ]
        )
    )
    frame = pd.DataFrame({"operator": names})
    frame["side"] = [
        BOTH if n in oa.index and n in ob.index else ONLY_A if n in oa.index else ONLY_B
        for n in names
    ]
    frame["kernels_a"] = oa["kernels"].reindex(names).fillna(0).to_numpy(dtype=float) / na
    frame["kernels_b"] = ob["kernels"].reindex(names).fillna(0).to_numpy(dtype=float) / nb
    frame["us_a"] = oa["kernel_us"].reindex(names).fillna(0.0).to_numpy(dtype=float) / na
    frame["us_b"] = ob["kernel_us"].reindex(names).fillna(0.0).to_numpy(dtype=float) / nb
    return _finish(frame)


@dataclass
class Diff:
    a_label: str
    b_label: str
    overview: pd.DataFrame
    categories: pd.DataFrame
    kernels: pd.DataFrame
    operators: pd.DataFrame
    notes: list[str] = field(default_factory=list)
    #: CPU operators matched by name (cpu_operator_diff)
    cpu_operators: pd.DataFrame = field(default_factory=pd.DataFrame)
    #: two CPU runs: no kernel table applies, the CPU operators are the diff
    on_cpu: bool = False

    @property
    def shared_kernels(self) -> int:
        return int((self.kernels["side"] == BOTH).sum())

    @property
    def change_level(self) -> str:
        """Where top gainers and losers are looked for: kernels when the runs share kernel
        names, CPU operators (self time) for two CPU runs, else launching operators."""
        if self.on_cpu:
            return "CPU operator"
        return "kernel" if self.shared_kernels else "operator"

    def top_changes(self, n: int = 10) -> tuple[pd.DataFrame, pd.DataFrame]:
        """(faster in B, slower in B): the n largest negative and positive deltas."""
        level = self.change_level
        frame = (
            self.kernels
            if level == "kernel"
            else self.cpu_operators
            if level == "CPU operator"
            else self.operators
        )
        faster = frame[frame["delta_us"] < 0].sort_values("delta_us", kind="stable")
        slower = frame[frame["delta_us"] > 0].sort_values(
            "delta_us", ascending=False, kind="stable"
        )
        return (faster.head(n) if n else faster).reset_index(drop=True), (
            slower.head(n) if n else slower
        ).reset_index(drop=True)


def diff(a: Summary, b: Summary, a_label: str = "A", b_label: str = "B") -> Diff:
    kernels = kernel_diff(a, b)
    notes = []
    if len(kernels) and not (kernels["side"] == BOTH).any():
        notes.append(
            "the two runs share no kernel name (e.g. eager vs TensorRT): compare them "
            "by category and by launching operator; top changes are per operator"
        )
    if steps_of(a) != steps_of(b):
        notes.append(f"A recorded {steps_of(a)} steps and B {steps_of(b)}: every time is per step")
    if a.kernels.total_kernel_us or b.kernels.total_kernel_us:
        notes.append(PIPE_BUSY_NOTE)
    return Diff(
        a_label=a_label,
        b_label=b_label,
        overview=overview_diff(a, b),
        categories=category_diff(a, b),
        kernels=kernels,
        operators=operator_diff(a, b),
        notes=notes,
        cpu_operators=cpu_operator_diff(a, b),
        on_cpu=on_cpu(a, b),
    )


# ---- the typed form of the tables: what `compare --json` prints (profiler.trace.diff_rows) ----

_CHANGES: dict[str, type[Change]] = {
    "kernel": KernelChange,
    "operator": OperatorChange,
    "CPU operator": CpuOperatorChange,
}
R = TypeVar("R", bound=DiffRow)


def rows(frame: pd.DataFrame, row: type[R]) -> list[R]:
    """A table's rows as records of ``row`` (a column it does not name is refused)."""
    records = json_safe(frame.to_dict(orient="records")) if len(frame) else []
    return [msgspec.convert(record, row) for record in records]


def tables(found: Diff, top: int) -> DiffTables:
    """The typed form of ``found``'s tables (DiffTables), the long lists cut to ``top``."""
    faster, slower = found.top_changes(top or 0)
    every_faster, every_slower = found.top_changes(0)
    change = _CHANGES[found.change_level]

    def head(frame: pd.DataFrame) -> pd.DataFrame:
        return frame if not top else frame.head(top)

    return DiffTables(
        overview=rows(found.overview, OverviewRow),
        categories=rows(found.categories, CategoryRow),
        kernels=rows(head(found.kernels), KernelRow),
        operators=rows(head(found.operators), OperatorRow),
        cpu_operators=rows(head(found.cpu_operators), CpuOperatorRow),
        faster_in_b=rows(faster, change),
        slower_in_b=rows(slower, change),
        notes=list(found.notes),
        totals={
            "kernels": len(found.kernels),
            "operators": len(found.operators),
            "cpu_operators": len(found.cpu_operators),
            "faster_in_b": len(every_faster),
            "slower_in_b": len(every_slower),
        },
    )
