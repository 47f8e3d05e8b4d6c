"""The diff's tables as typed rows (profiler.trace.diff builds them from its DataFrames): what
`compare --json` prints of them, and what docs/schema/compare.json describes. msgspec only, so
the documents' types (profiler.cli.documents) name them without loading pandas.

Every time is µs per profiled step, as the tables'; a figure that is not finite is None.
"""

from __future__ import annotations

import msgspec


class DiffRow(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """A row of one of the diff's tables: a column the type does not name is refused."""


class OverviewRow(DiffRow):
    """One headline metric (overview_diff): its value on each side, B - A, and the relative
    change (None for a percentage: its change is the delta, in points); the timed window's rows
    (a comparison of two runs) carry each window's CV."""

    metric: str
    unit: str
    a: float | None
    b: float | None
    delta: float | None
    change_pct: float | None
    cv_a: float | None | msgspec.UnsetType = msgspec.UNSET
    cv_b: float | None | msgspec.UnsetType = msgspec.UNSET


class CategoryRow(DiffRow):
    """Kernel time of one category on each side (category_diff)."""

    category: str
    us_a: float | None
    us_b: float | None
    share_a_pct: float | None
    share_b_pct: float | None
    tensor_core_a_pct: float | None
    tensor_core_b_pct: float | None
    calls_a: float | None
    calls_b: float | None
    delta_us: float | None
    change_pct: float | None


class KernelRow(DiffRow):
    """One kernel, matched by full name (kernel_diff): on both sides or one."""

    side: str
    kernel: str
    category: str | None
    tensor_core: str | None
    calls_a: float | None
    calls_b: float | None
    us_a: float | None
    us_b: float | None
    delta_us: float | None
    change_pct: float | None
    name: str


class OperatorRow(DiffRow):
    """Kernel time per launching CPU operator on each side (operator_diff)."""

    operator: str
    side: str
    kernels_a: float | None
    kernels_b: float | None
    us_a: float | None
    us_b: float | None
    delta_us: float | None
    change_pct: float | None


class CpuOperatorRow(DiffRow):
    """A CPU operator matched by name (cpu_operator_diff): calls, self time (us_a, us_b and
    their delta) and total time on each side."""

    operator: str
    side: str
    calls_a: float | None
    calls_b: float | None
    us_a: float | None
    us_b: float | None
    delta_us: float | None
    change_pct: float | None
    total_a_us: float | None
    total_b_us: float | None
    total_delta_us: float | None


# the largest changes (Diff.top_changes) are rows of the level the runs differ at, named by
# their "level" key: Diff.change_level
class KernelChange(KernelRow, tag_field="level", tag="kernel"):
    """A kernel among the largest changes (the runs share kernel names)."""


class OperatorChange(OperatorRow, tag_field="level", tag="operator"):
    """A launching operator among the largest changes (the runs share no kernel name)."""


class CpuOperatorChange(CpuOperatorRow, tag_field="level", tag="CPU operator"):
    """A CPU operator among the largest changes (two CPU runs), by self time."""


Change = KernelChange | OperatorChange | CpuOperatorChange


class DiffTables(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """The diff's tables as records, the kernel, operator and CPU operator lists and the largest
    changes cut to ``top`` rows (0: all), with how many rows each had before the cut
    (``totals``)."""

    overview: list[OverviewRow]
    categories: list[CategoryRow]
    kernels: list[KernelRow]
    operators: list[OperatorRow]
    cpu_operators: list[CpuOperatorRow]
    faster_in_b: list[Change]
    slower_in_b: list[Change]
    notes: list[str]
    totals: dict[str, int]
