"""Change points in a config's series of commits, their size, their kernel cause, and the CI
gate on them (`history check`). Torch-free; the detection is Apache Otava's (the ``history``
extra), imported when a series is checked.

- **The series.** A config's records (profiler.runs.history_store) grouped by commit, in the order
  each commit first ran. A commit's level on a figure (GPU time, latency) is the geometric
  mean of the per-process medians of all its records: the figure a verdict speaks of.
- **Detection.** Otava's change-point detection (``compute_change_points``: E-divisive means on
  sliding windows, the split candidates kept by a two-sided t-test at ``max_pvalue`` after a
  merge pass; Fleming et al. 2023, "Hunter"), run on each figure's levels. A change found on
  both figures within one commit of each other is one change ("both" moved).
- **Size.** Each figure's verdict on the commits after a change against those before it, each
  side up to the neighbouring change: the ratio of the geometric means of the per-process
  medians with its 95 % interval (profiler.analysis.verdict.compare, unpaired: the processes
  of two commits ran apart).
- **Cause.** The categories and the kernels whose time per profiled step moved most: the median
  over up to CAUSE_COMMITS commits each side of each one's time, after - before, with the
  spread (the larger interquartile range of the two sides' per-commit times).
- **Gate.** A change counts when it is among the last ``recent`` commits (or after ``since``),
  was found on the gated figure, and that figure's ratio is above 1 + max_slowdown; a change
  that `history confirm` re-timed and did not find (``refuted``) does not.

The method's defaults (MAX_PVALUE, WINDOW, MIN_COMMITS) were chosen on series built from
measured per-process noise (scripts/history_calibration.py; docs/guide/history.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import msgspec
import numpy as np

from profiler.analysis.history_records import (
    ChangePoint,
    Confirmed,
    KernelShift,
    Moved,
    SeriesSummary,
)
from profiler.analysis.records import FigureName, Verdict
from profiler.analysis.verdict import compare
from profiler.errors import UserError
from profiler.runs.history_store import TOP_KERNELS, Confirmation, HistoryRecord, KernelTime

#: the detection's significance level: Otava's default (its first pass takes 10x this)
MAX_PVALUE = 0.001
#: Otava's sliding window, in commits
WINDOW = 30
#: the fewest commits a series needs before a change point is looked for
MIN_COMMITS = 4
#: the commits each side of a change whose kernel tables the cause compares
CAUSE_COMMITS = 5
#: kernels and categories named per change
TOP_CAUSES = 5
#: the figures changes are looked for on, the quiet one first
FIGURES: tuple[FigureName, ...] = ("gpu_time", "latency")
#: the changes `history check` gates on by default: those among the series' last RECENT commits
RECENT = 5
METHOD = (
    f"Apache Otava compute_change_points (E-divisive means, t-test at p < {MAX_PVALUE}, window "
    f"{WINDOW} commits) on each commit's geometric mean of per-process medians"
)

OTAVA_MISSING = (
    'history check finds change points with Apache Otava: pip install -e ".[history]" '
    "(the apache-otava package)"
)


@dataclass
class Commit:
    """One commit of a series: its records, in the order they ran."""

    commit: str
    records: list[HistoryRecord] = field(default_factory=list)

    def medians(self, figure: str) -> list[float]:
        return [m for r in self.records for m in r.medians(figure)]

    def level(self, figure: str) -> float | None:
        """The geometric mean of the per-process medians of ``figure`` over its records."""
        values = self.medians(figure)
        return float(np.exp(np.mean(np.log(values)))) if values else None


def commits_of(records: Sequence[HistoryRecord]) -> list[Commit]:
    """Records (in the order they ran) grouped by commit, each commit where it first ran."""
    found: dict[str, Commit] = {}
    for record in records:
        found.setdefault(record.commit, Commit(record.commit)).records.append(record)
    return list(found.values())


def detect(
    values: Sequence[float], *, max_pvalue: float = MAX_PVALUE, window: int = WINDOW
) -> list[tuple[int, float]]:
    """The change points of one series of levels: (index of the first value after the change,
    the p-value of the change's t-test), by index. Apache Otava's detection (module doc)."""
    if len(values) < 2:
        return []
    try:
        from otava.analysis import compute_change_points
    except ImportError:
        raise UserError(OTAVA_MISSING) from None
    points, _ = compute_change_points(
        [float(v) for v in values], window_len=window, max_pvalue=max_pvalue
    )
    return sorted((int(p.index), float(p.stats.pvalue)) for p in points)


def figure_changes(
    commits: Sequence[Commit], figure: str, *, max_pvalue: float = MAX_PVALUE, window: int = WINDOW
) -> list[tuple[int, float]]:
    """detect on the commits that measured ``figure``, as indexes into ``commits``."""
    where = [i for i, c in enumerate(commits) if c.level(figure) is not None]
    if len(where) < MIN_COMMITS:
        return []
    levels = [commits[i].level(figure) or 0.0 for i in where]
    return [(where[i], p) for i, p in detect(levels, max_pvalue=max_pvalue, window=window)]


def merged(found: dict[FigureName, list[tuple[int, float]]]) -> list[tuple[int, dict[str, float]]]:
    """The changes of both figures as one list: a latency change within one commit of a GPU-time
    change is that change (the GPU time's index kept); each with the p-value of each figure
    that found it."""
    changes: dict[int, dict[str, float]] = {}
    for figure in FIGURES:
        for index, p in found.get(figure, []):
            near = [i for i in changes if abs(i - index) <= 1 and figure not in changes[i]]
            changes.setdefault(near[0] if near else index, {})[figure] = p
    return sorted(changes.items())


def _moved(p_values: dict[str, float]) -> Moved:
    if len(p_values) == 2:
        return "both"
    return "gpu_time" if "gpu_time" in p_values else "latency"


def _verdict(
    before: Sequence[Commit], after: Sequence[Commit], figure: FigureName
) -> Verdict | None:
    a = [m for c in before for m in c.medians(figure)]
    b = [m for c in after for m in c.medians(figure)]
    if not a or not b:
        return None
    return compare(a, b, figure=figure)


#: a commit's kernel or category table: name -> (its row, us per step), and whether the table
#: is whole (a name absent from it ran 0 µs) or cut to the top kernels (absent: unknown)
Table = tuple[dict[str, tuple[KernelTime, float]], bool]


def _per_commit(commit: Commit, kind: str) -> Table | None:
    """The commit's table of ``kind``, each name's time and calls averaged over its records
    with a trace; None when none has one. A record's kernel table holds its TOP_KERNELS
    kernels: when it is cut there, a name it lacks is unknown, not 0."""
    traced = [r for r in commit.records if r.steps]
    if not traced:
        return None
    rows: dict[str, list[KernelTime]] = {}
    whole = True
    for record in traced:
        table = record.categories if kind == "category" else record.kernels
        whole = whole and (kind == "category" or len(table) < TOP_KERNELS)
        for row in table:
            rows.setdefault(row.name, []).append(row)
    out = {}
    for name, found in rows.items():
        if len(found) < len(traced) and not whole:
            continue
        us = sum(r.us for r in found) / len(traced)
        calls = sum(r.calls for r in found) / len(traced)
        out[name] = (msgspec.structs.replace(found[0], calls=calls), us)
    return out, whole


def shifts(
    before: Sequence[Commit], after: Sequence[Commit], kind: str, top: int = TOP_CAUSES
) -> list[KernelShift]:
    """The kernels (kind "kernel") or categories ("category") whose time per step moved most
    across a change, from the CAUSE_COMMITS commits nearest it each side (module doc)."""
    sides: list[list[Table]] = []
    for commits in (before[-CAUSE_COMMITS:], after[:CAUSE_COMMITS]):
        sides.append([t for t in (_per_commit(c, kind) for c in commits) if t is not None])
    if not sides[0] or not sides[1]:
        return []
    names = {n for tables in sides for table, _ in tables for n in table}
    found = []
    for name in names:
        times, calls, row = [], [], None
        for tables in sides:
            known = [(t, whole) for t, whole in tables if name in t or whole]
            times.append(np.asarray([t[name][1] if name in t else 0.0 for t, _ in known]))
            calls.append([t[name][0].calls if name in t else 0.0 for t, _ in known])
            row = row or next((t[name][0] for t, _ in known if name in t), None)
        if row is None or not len(times[0]) or not len(times[1]):
            continue
        b, a = float(np.median(times[0])), float(np.median(times[1]))
        spread = max(float(np.subtract(*np.percentile(t, [75, 25]))) for t in times)
        found.append(
            KernelShift(
                name=name,
                label=row.label,
                category=row.category,
                before_us=b,
                after_us=a,
                delta_us=a - b,
                spread_us=spread,
                before_calls=float(np.median(calls[0])),
                after_calls=float(np.median(calls[1])),
                commits_before=len(times[0]),
                commits_after=len(times[1]),
            )
        )
    found.sort(key=lambda s: (-abs(s.delta_us), s.name))
    return found[:top]


@dataclass(frozen=True)
class Gate:
    """What the gate looks at: the figure, the slowdown it allows (a fraction), and which
    changes: after commit ``since`` when given, else among the last ``recent`` commits."""

    figure: FigureName = "gpu_time"
    max_slowdown: float = 0.02
    recent: int = RECENT
    since: str | None = None


def _gated(commits: Sequence[Commit], index: int, gate: Gate) -> bool:
    if gate.since is not None:
        names = [c.commit for c in commits]
        return gate.since in names and index > names.index(gate.since)
    return index >= len(commits) - gate.recent


def _confirmed(
    config: str,
    before: str,
    after: str,
    figure: FigureName,
    confirmations: Sequence[Confirmation],
) -> Confirmed:
    """The newest confirmation of this change: confirmed when its verdict on ``figure`` is
    slower or faster, refuted otherwise."""
    mine = [
        c
        for c in confirmations
        if (c.config_key, c.commit_before, c.commit_after) == (config, before, after)
    ]
    if not mine:
        return "unconfirmed"
    verdict = (mine[-1].verdicts.get(figure) or {}).get("verdict")
    return "confirmed" if verdict in ("slower", "faster") else "refuted"


def check_series(
    config: str,
    records: Sequence[HistoryRecord],
    *,
    gate: Gate = Gate(),
    confirmations: Sequence[Confirmation] = (),
    first_number: int = 1,
    max_pvalue: float = MAX_PVALUE,
    window: int = WINDOW,
) -> tuple[SeriesSummary, list[ChangePoint]]:
    """One config's series and its change points, numbered from ``first_number``."""
    commits = commits_of(records)
    summary = SeriesSummary(
        config,
        len(commits),
        len(records),
        commits[0].commit if commits else "",
        commits[-1].commit if commits else "",
        skipped=None
        if len(commits) >= MIN_COMMITS
        else f"{len(commits)} commit(s): change points need {MIN_COMMITS} or more",
    )
    if summary.skipped is not None:
        return summary, []
    found = {f: figure_changes(commits, f, max_pvalue=max_pvalue, window=window) for f in FIGURES}
    points = merged(found)
    bounds = [0] + [i for i, _ in points] + [len(commits)]
    changes = []
    for k, (index, p_values) in enumerate(points):
        before, after = commits[bounds[k] : index], commits[index : bounds[k + 2]]
        verdicts = {f: _verdict(before, after, f) for f in FIGURES}
        chosen = verdicts[gate.figure]
        moved = _moved(p_values)
        regression = (
            gate.figure in p_values and chosen is not None and chosen.ratio > 1 + gate.max_slowdown
        )
        changes.append(
            ChangePoint(
                number=first_number + k,
                config=config,
                index=index,
                commit_before=commits[index - 1].commit,
                commit_after=commits[index].commit,
                commits_before=len(before),
                commits_after=len(after),
                moved=moved,
                p_values=p_values,
                gpu_time=verdicts["gpu_time"],
                latency=verdicts["latency"],
                categories=shifts(before, after, "category"),
                kernels=shifts(before, after, "kernel"),
                regression=bool(regression),
                gated=_gated(commits, index, gate),
                confirmed=_confirmed(
                    config,
                    commits[index - 1].commit,
                    commits[index].commit,
                    gate.figure,
                    confirmations,
                ),
            )
        )
    return summary, changes


def failing(changes: Sequence[ChangePoint]) -> list[int]:
    """The numbers of the changes that fail the gate: gated regressions not refuted."""
    return [c.number for c in changes if c.gated and c.regression and c.confirmed != "refuted"]
