"""The typed records of a folder of rank traces (profiler.analysis.rank_run): each rank's figures
per step and on average, the straggler, and two such runs compared. msgspec only, as
profiler.analysis.records: the command line names these types in its --json documents."""

from __future__ import annotations

from profiler.analysis.records import Record

#: the figures of a rank that the TensorBoard plugin's Distributed view gives too (its
#: "Computation/Communication Overview": computation and communication without their overlap,
#: overlapping, other; torch-tb-profiler 0.4.3)
PLUGIN_FIGURES = ("computation_ms", "overlapping_ms", "communication_ms", "other_ms")


class RankStep(Record):
    """One step of one rank, ms. The plugin's four (PLUGIN_FIGURES) add up to ``step_ms``;
    ``kernel_ms``, ``comm_ms``, ``exposed_comm_ms`` and ``busy_ms`` are this tool's
    (profiler.trace.ranks)."""

    rank: int
    step: str
    step_ms: float
    computation_ms: float
    overlapping_ms: float
    communication_ms: float
    other_ms: float
    kernel_ms: float
    comm_ms: float
    exposed_comm_ms: float
    busy_ms: float


class RankFigures(Record):
    """One rank: its trace, how many steps it holds, and the mean of each RankStep figure over
    the steps all ranks hold (``steps_used``)."""

    rank: int
    trace: str
    steps: int
    steps_used: int
    step_ms: float | None
    computation_ms: float | None
    overlapping_ms: float | None
    communication_ms: float | None
    other_ms: float | None
    kernel_ms: float | None
    comm_ms: float | None
    exposed_comm_ms: float | None
    busy_ms: float | None


class Straggler(Record):
    """The rank whose busy time (step time without its exposed communication) is longest on
    average over the common steps, and what it costs the others: per step, how much longer
    the other ranks sit in exposed communication than it does (their mean), in ms; its mean,
    least and most over the steps, and in how many steps it was the slowest rank."""

    rank: int
    steps: int
    slowest_in: int
    busy_ms: float
    others_busy_ms: float
    cost_ms: float
    cost_min_ms: float
    cost_max_ms: float
    definition: str


class RankRunFigures(Record):
    """A folder of rank traces: the ranks by their recorded rank, those the world size says are
    missing, the steps all ranks hold, each rank's figures, every rank's steps, the straggler
    (None with fewer than two ranks or no common step) and what to know."""

    folder: str
    backend: str | None
    world_size: int | None
    ranks: list[int]
    missing_ranks: list[int]
    common_steps: list[str]
    per_rank: list[RankFigures]
    per_step: list[RankStep]
    straggler: Straggler | None
    plugin_figures: list[str]
    notes: list[str]
    #: the job's step: the slowest rank's step time, per common step, mean (ms)
    job_step_ms: float | None


class RankDelta(Record):
    """One rank of both runs: its mean figures in A and B (ms) and B - A."""

    rank: int
    step_ms_a: float | None
    step_ms_b: float | None
    busy_ms_a: float | None
    busy_ms_b: float | None
    exposed_comm_ms_a: float | None
    exposed_comm_ms_b: float | None
    kernel_ms_a: float | None
    kernel_ms_b: float | None
    comm_ms_a: float | None
    comm_ms_b: float | None


class RankComparisonFigures(Record):
    """Two folders of rank traces, rank by rank (the ranks both hold) and as a whole: the job's
    step (the slowest rank's, mean over each run's common steps) and each run's straggler."""

    a: RankRunFigures
    b: RankRunFigures
    ranks: list[RankDelta]
    only_a: list[int]
    only_b: list[int]
    job_step_ms_a: float | None
    job_step_ms_b: float | None
    job_step_ratio: float | None
    notes: list[str]
