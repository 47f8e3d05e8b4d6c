"""The typed records `history check` returns and --json prints (profiler.analysis.change_points):
a change point of one config's series, its two verdicts, the kernels and categories behind it,
and the gate's answer. msgspec and the verdict record only: the command line describes its
documents from these types before any analysis is loaded."""

from __future__ import annotations

from typing import Literal

import msgspec

from profiler.analysis.records import FigureName, Verdict

#: which figures a change point moved: the change-point detection found it on GPU time, on
#: latency, or on both
Moved = Literal["gpu_time", "latency", "both"]
#: what `history confirm` said of a change: not re-timed yet, re-timed and found (its verdict
#: on the gated figure is slower or faster), or re-timed and not found (same or undecided)
Confirmed = Literal["unconfirmed", "confirmed", "refuted"]


class KernelShift(msgspec.Struct, frozen=True):
    """A kernel or a category across a change point: its time per profiled step on each side
    (the median over the commits of the side that recorded a trace), the difference after -
    before, its calls per step on each side, and the spread: the larger of the two sides'
    interquartile ranges of per-commit time (µs), against which the difference reads."""

    name: str
    label: str
    category: str | None
    before_us: float
    after_us: float
    delta_us: float
    spread_us: float
    before_calls: float
    after_calls: float
    commits_before: int
    commits_after: int


class ChangePoint(msgspec.Struct, frozen=True, kw_only=True):
    """One change point of one config's series: the last commit before it and the first after
    it (``index`` is the first after's position in the series, from 0), what moved, each
    figure's verdict of the commits after against those before (per-process medians, the
    commits up to the neighbouring change points; profiler.analysis.verdict), and the kernels
    and categories whose time per step moved most."""

    number: int
    config: str
    index: int
    commit_before: str
    commit_after: str
    commits_before: int
    commits_after: int
    moved: Moved
    #: the p-value of the detection's test on each figure where it found this change point
    p_values: dict[str, float]
    gpu_time: Verdict | None
    latency: Verdict | None
    categories: list[KernelShift]
    kernels: list[KernelShift]
    #: the gated figure got slower beyond --max-slowdown (its ratio's point estimate)
    regression: bool
    #: among the changes the gate looks at (--since / --recent)
    gated: bool
    confirmed: Confirmed = "unconfirmed"

    def verdict(self, figure: FigureName) -> Verdict | None:
        return self.gpu_time if figure == "gpu_time" else self.latency


class SeriesSummary(msgspec.Struct, frozen=True):
    """One config's series: its commits and records, and why no change point could be looked
    for when it could not (fewer than MIN_COMMITS commits)."""

    config: str
    commits: int
    records: int
    first_commit: str
    last_commit: str
    skipped: str | None = None


class HistoryCheck(msgspec.Struct, frozen=True, kw_only=True):
    """`history check`: every series, every change point, and the gate: the figure and the
    slowdown it allows, the changes it looked at and the exit status it gave."""

    database: str
    schema_version: int
    method: str
    figure: FigureName
    max_slowdown_pct: float
    series: list[SeriesSummary]
    changes: list[ChangePoint]
    failing: list[int]
    exit_status: int
