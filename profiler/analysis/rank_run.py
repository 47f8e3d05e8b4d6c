"""A folder of rank traces (one torch.profiler trace per rank of one distributed run): the facade
`summarize`, `compare` and `report` read it through, as RunAnalysis for one trace.

A TARGET is a rank folder (rank_folder) when it resolves to several traces (a folder of traces,
a run folder whose result.json names several, the run folder of `run --nproc N`, whose
result.json names each rank's) that each record a rank in their
``distributedInfo``, and the ranks differ; any other folder of traces keeps the one-trace rule
(profiler.runs.command_targets.resolve_target: the newest). Ranks are ordered by the rank they
record, never by file name. Steps are matched across ranks by name (``ProfilerStep#N``): the
figures are means over the steps every rank holds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import pandas as pd

from profiler.analysis.rank_records import (
    PLUGIN_FIGURES,
    RankComparisonFigures,
    RankDelta,
    RankFigures,
    RankRunFigures,
    RankStep,
    Straggler,
)
from profiler.errors import UserError
from profiler.runs.command_targets import locate, rank_traces, trace_set
from profiler.trace.load import load_trace
from profiler.trace.ranks import DistributedInfo, distributed_info, rank_steps
from profiler.units import time

#: how the straggler is found and costed, for the reader
STRAGGLER_DEFINITION = (
    "the rank with the longest busy time per step (its step without its exposed communication, "
    "the communication no other kernel overlaps), on average over the common steps; its cost: "
    "per step, how much longer the other ranks sit in exposed communication than it does, "
    "their mean"
)
#: a step figure's columns in profiler.trace.ranks.rank_steps (µs) -> the record's (ms)
_COLUMNS = {
    "step_us": "step_ms",
    "computation_us": "computation_ms",
    "overlapping_us": "overlapping_ms",
    "communication_us": "communication_ms",
    "other_us": "other_ms",
    "kernel_us": "kernel_ms",
    "comm_us": "comm_ms",
    "exposed_comm_us": "exposed_comm_ms",
    "busy_us": "busy_ms",
}


def rank_folder(target: str, root: Path | None = None) -> list[tuple[Path, DistributedInfo]] | None:
    """The traces of TARGET with their ranks, ordered by rank, when TARGET is a rank folder;
    None otherwise (one file, one trace, a trace without a rank, or one rank only). Two traces
    of one rank are refused in one line: a rank folder holds one trace per rank."""
    try:
        found = trace_set(target, root)
    except UserError:  # no traces: the one-trace path says so, as it always has
        return None
    traces = rank_traces(target, root) or found.traces
    if found.one_file or len(traces) < 2:
        return None
    infos = []
    for path in traces:
        try:
            info = distributed_info(path)
        except UserError:  # a damaged file: the one-trace path says what is wrong with it
            return None
        if info is None:
            return None
        infos.append((path, info))
    by_rank: dict[int, list[Path]] = {}
    for path, info in infos:
        by_rank.setdefault(info.rank, []).append(path)
    if len(by_rank) < 2:
        return None
    for rank, paths in sorted(by_rank.items()):
        if len(paths) > 1:
            names = ", ".join(p.name for p in paths)
            raise UserError(
                f"{target}: {len(paths)} traces of rank {rank} ({names}); a folder of rank "
                "traces holds one trace per rank (one profiler cycle of one run)"
            )
    return sorted(infos, key=lambda pair: pair[1].rank)


def spans(ranks: list[int]) -> str:
    """Ranks as runs: ``0-3, 5, 7-9``."""
    parts: list[str] = []
    for rank in sorted(ranks):
        if parts and rank == int(parts[-1].split("-")[-1]) + 1:
            parts[-1] = f"{parts[-1].split('-')[0]}-{rank}"
        else:
            parts.append(str(rank))
    return ", ".join(parts)


def _mean(frame: pd.DataFrame, column: str) -> float | None:
    return float(frame[column].mean()) if len(frame) else None


@dataclass
class RankRun:
    """A folder of rank traces (TARGET), read once: ``figures`` is the record the views show."""

    target: str
    root: Path | None = None
    traces: list[tuple[Path, DistributedInfo]] = field(init=False)

    def __post_init__(self) -> None:
        found = rank_folder(self.target, self.root)
        if found is None:
            raise UserError(
                f"{self.target} is not a folder of rank traces: it needs two or more traces "
                "that record different ranks (distributedInfo)"
            )
        self.traces = found

    @property
    def folder(self) -> Path:
        return locate(self.target, self.root)

    @cached_property
    def steps(self) -> dict[int, pd.DataFrame]:
        """Each rank's steps (profiler.trace.ranks.rank_steps), by rank."""
        return {info.rank: rank_steps(load_trace(path)) for path, info in self.traces}

    @cached_property
    def figures(self) -> RankRunFigures:
        infos = [info for _, info in self.traces]
        ranks = [info.rank for info in infos]
        worlds = {info.world_size for info in infos if info.world_size is not None}
        world = max(worlds) if worlds else None
        backends = sorted({info.backend for info in infos if info.backend})
        notes: list[str] = []
        if len(worlds) > 1:
            notes.append(f"the traces record different world sizes: {sorted(worlds)}")
        missing = [r for r in range(world) if r not in ranks] if world is not None else []
        if missing:
            notes.append(
                f"{len(missing)} of {world} ranks have no trace here (ranks {spans(missing)} "
                f"missing): the figures and the straggler are of ranks {spans(ranks)} only"
            )
        common = _common_steps(self.steps, ranks, notes)
        per_rank, per_step = [], []
        for path, rank in zip((p for p, _ in self.traces), ranks):
            frame = self.steps[rank]
            for row in frame.itertuples(index=False):
                per_step.append(
                    RankStep(
                        rank=rank,
                        step=str(row.step),
                        **{ms: float(getattr(row, us)) / 1e3 for us, ms in _COLUMNS.items()},
                    )
                )
            used = frame[frame["step"].isin(common)]
            means = {ms: _mean(used, us) for us, ms in _COLUMNS.items()}
            per_rank.append(
                RankFigures(
                    rank=rank,
                    trace=str(path),
                    steps=len(frame),
                    steps_used=len(used),
                    **{k: None if v is None else v / 1e3 for k, v in means.items()},
                )
            )
        notes += _plugin_notes(per_rank)
        return RankRunFigures(
            folder=str(self.folder),
            backend=", ".join(backends) or None,
            world_size=world,
            ranks=ranks,
            missing_ranks=missing,
            common_steps=common,
            per_rank=per_rank,
            per_step=per_step,
            straggler=_straggler(self.steps, common),
            plugin_figures=list(PLUGIN_FIGURES),
            notes=notes,
            job_step_ms=_job_step(self.steps, common),
        )


def _common_steps(steps: dict[int, pd.DataFrame], ranks: list[int], notes: list[str]) -> list[str]:
    """The steps every rank holds, in the first rank's order; a note in ``notes`` where the
    ranks hold different steps, or none in common."""
    names = {rank: list(frame["step"]) for rank, frame in steps.items()}
    common = [s for s in names[ranks[0]] if all(s in names[r] for r in ranks)]
    counts = {rank: len(held) for rank, held in names.items()}
    if len(set(counts.values())) > 1 or len(common) < max(counts.values()):
        held = ", ".join(f"rank {r}: {n}" for r, n in counts.items())
        notes.append(
            f"the ranks hold different steps ({held}); the figures are over the "
            f"{len(common)} step(s) all hold"
            + (f" ({common[0]} to {common[-1]})" if common else "")
        )
    if not common:
        notes.append("no step is held by every rank: no per-rank means and no straggler")
    return common


def _aligned(steps: dict[int, pd.DataFrame], common: list[str], column: str) -> pd.DataFrame:
    """One column of every rank over the common steps: steps x ranks."""
    return pd.DataFrame(
        {
            rank: frame.drop_duplicates("step").set_index("step").loc[common, column]
            for rank, frame in steps.items()
        }
    )


def _job_step(steps: dict[int, pd.DataFrame], common: list[str]) -> float | None:
    """The slowest rank's step time per common step, mean, ms."""
    if not common:
        return None
    return float(_aligned(steps, common, "step_us").max(axis=1).mean()) / 1e3


def _straggler(steps: dict[int, pd.DataFrame], common: list[str]) -> Straggler | None:
    """STRAGGLER_DEFINITION over the common steps; None with one rank or no common step."""
    if len(steps) < 2 or not common:
        return None
    busy = _aligned(steps, common, "busy_us")
    exposed = _aligned(steps, common, "exposed_comm_us")
    rank = int(busy.mean().idxmax())
    others = [r for r in busy.columns if r != rank]
    cost = exposed[others].mean(axis=1) - exposed[rank]
    return Straggler(
        rank=rank,
        steps=len(common),
        slowest_in=int((busy.idxmax(axis=1) == rank).sum()),
        busy_ms=float(busy[rank].mean()) / 1e3,
        others_busy_ms=float(busy[others].to_numpy().mean()) / 1e3,
        cost_ms=float(cost.mean()) / 1e3,
        cost_min_ms=float(cost.min()) / 1e3,
        cost_max_ms=float(cost.max()) / 1e3,
        definition=STRAGGLER_DEFINITION,
    )


#: what the plugin's split means in a trace without kernels
CPU_PLUGIN_NOTE = (
    "in traces without kernels the TensorBoard plugin's computation is every CPU operator's "
    "span, the collectives' own operators included (c10d::allreduce_, "
    "_c10d_functional::wait_tensor), and its communication the gloo:/nccl: spans, which gloo "
    "runs on threads of its own: its overlapping holds the time a rank's thread waits in those "
    "operators while the collective runs, not computation beside communication"
)


def _plugin_notes(per_rank: list[RankFigures]) -> list[str]:
    """Where the plugin's Distributed view misses communication this tool counts: collectives
    it does not name (all_to_all, _all_gather_base ...) or kernels it cannot link to theirs;
    what its overlapping is in a trace without kernels."""
    if per_rank and all(r.kernel_ms == 0 for r in per_rank):
        return [CPU_PLUGIN_NOTE] if any(r.overlapping_ms for r in per_rank) else []
    missed = []
    for r in per_rank:
        if r.comm_ms is None or r.overlapping_ms is None or r.communication_ms is None:
            continue
        plugin = r.overlapping_ms + r.communication_ms
        if r.comm_ms > 1.5 * plugin + 0.01 * (r.step_ms or 0):
            missed.append(r)
    if not missed:
        return []
    worst = max(missed, key=lambda r: (r.comm_ms or 0.0) - (r.communication_ms or 0.0))
    return [
        f"the TensorBoard plugin's Distributed view sees less communication than the "
        f"communication kernels hold on {len(missed)} of {len(per_rank)} ranks (e.g. rank "
        f"{worst.rank}: {time(worst.comm_ms)} per step of communication here, "
        f"{time((worst.overlapping_ms or 0.0) + (worst.communication_ms or 0.0))} there): "
        "it counts as communication only nccl:/gloo: broadcast, reduce, all_reduce, "
        "all_gather and reduce_scatter operators and the kernels linked to them by External "
        "id, the rest as computation"
    ]


@dataclass
class RankComparison:
    """Two folders of rank traces, B against A."""

    a: RankRun
    b: RankRun

    @cached_property
    def figures(self) -> RankComparisonFigures:
        fa, fb = self.a.figures, self.b.figures
        by_a = {r.rank: r for r in fa.per_rank}
        by_b = {r.rank: r for r in fb.per_rank}
        both = sorted(set(by_a) & set(by_b))
        rows = [
            RankDelta(
                rank=rank,
                step_ms_a=by_a[rank].step_ms,
                step_ms_b=by_b[rank].step_ms,
                busy_ms_a=by_a[rank].busy_ms,
                busy_ms_b=by_b[rank].busy_ms,
                exposed_comm_ms_a=by_a[rank].exposed_comm_ms,
                exposed_comm_ms_b=by_b[rank].exposed_comm_ms,
                kernel_ms_a=by_a[rank].kernel_ms,
                kernel_ms_b=by_b[rank].kernel_ms,
                comm_ms_a=by_a[rank].comm_ms,
                comm_ms_b=by_b[rank].comm_ms,
            )
            for rank in both
        ]
        notes = []
        only_a = sorted(set(by_a) - set(by_b))
        only_b = sorted(set(by_b) - set(by_a))
        if only_a or only_b:
            notes.append(
                "the runs hold different ranks"
                + (f"; only A: {spans(only_a)}" if only_a else "")
                + (f"; only B: {spans(only_b)}" if only_b else "")
                + ": rank by rank, the ranks both hold"
            )
        if fa.world_size != fb.world_size:
            notes.append(f"world sizes differ: A {fa.world_size}, B {fb.world_size}")
        ja, jb = fa.job_step_ms, fb.job_step_ms
        return RankComparisonFigures(
            a=fa,
            b=fb,
            ranks=rows,
            only_a=only_a,
            only_b=only_b,
            job_step_ms_a=ja,
            job_step_ms_b=jb,
            job_step_ratio=None if not ja or jb is None else jb / ja,
            notes=notes,
        )
