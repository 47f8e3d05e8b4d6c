"""When a comparison's rounds may stop: a group-sequential rule over the looks a sweep takes
after each round (profiler.sweep.rounds). Pure Python.

Looking at a verdict after every round and stopping once it reads faster, slower or the same
would raise the false-verdict rate with every look. The rule used is of Haybittle and Peto's
kind (Haybittle 1971, Peto et al. 1976): an interim look decides only at level
``INTERIM_ALPHA`` (0.005: faster/slower at p < 0.005, the same on the 99 % interval), and the
last look (the last round the count or the budget allows) takes the usual verdict at 0.05. So
the verdict a comparison reports is always the usual one (its 95 % interval, its 90 % "same"
test): a decision at the interim level is one at 0.05 too.

Chosen by simulation (``scripts/sim_sequential.py``; docs/guide/statistics.md has its table):
per-process medians drawn with the between-process spread measured on GPUs (GPU time 0.5-2 %,
host latency 10-20 %) and the within-round correlation measured on an H200 (0.17) and an H100
(0.55), judged by this tool's verdict under fixed rounds, Pocock's constant boundary,
O'Brien-Fleming's and this rule at interim levels 0.001, 0.005 and 0.01. At 0.005 the false
faster/slower rate of identical configs stays within a few tenths of a point of fixed rounds'
(4.5 against 4.1 % at 10-20 % noise, 0-1.7 % on GPU time), the "same" rate and the power do
not drop, and a clear difference stops after 2 rounds instead of 5. Pocock's constant level
stops sooner but calls identical configs "same" less often (66 against 82 % at 1 % noise) and
judges the last round at 0.018, not 0.05; O'Brien-Fleming's first looks are stricter.
"""

from __future__ import annotations

from typing import Final

from profiler.analysis.records import FigureName
from profiler.analysis.timed_verdict import figure_verdict
from profiler.analysis.verdict import GPU_TIME, LATENCY, UNDECIDED, MachineNoise
from profiler.runs.samples import ConfigSamples

#: the level of an interim look (Haybittle-Peto)
INTERIM_ALPHA: Final = 0.005
#: the first round a look is taken after: a comparison then has its own run's window and two
#: rounds' on each side (a pair of rounds at least for the paired design)
FIRST_LOOK: Final = 2
RULE: Final = "Haybittle-Peto"


def figure_of(a: ConfigSamples, b: ConfigSamples) -> FigureName:
    """The figure a look judges: GPU time where every window of both sides measured it (it
    reproduces to a percent or two; latency, paced by the host, often needs more processes than
    any budget gives), else latency."""
    if all(w.gpu_ms for w in (*a.windows, *b.windows)):
        return GPU_TIME
    return LATENCY


def decided(
    a: ConfigSamples,
    b: ConfigSamples,
    alpha: float = INTERIM_ALPHA,
    machine: MachineNoise | None = None,
) -> bool:
    """Whether B against A reads faster, slower or the same at level ``alpha``, once each side
    has FIRST_LOOK windows from rounds (before that, a floor would stand in for the spread: a
    look is on measured spread only); paired or not as the final verdict chooses, at the rho of
    ``machine`` where `noise` measured it."""
    if min(sum(1 for w in side.windows if w.round) for side in (a, b)) < FIRST_LOOK:
        return False
    found = figure_verdict(a, b, figure_of(a, b), alpha=alpha, machine=machine)
    return found is None or found.verdict != UNDECIDED


def settled(
    samples: dict[str, ConfigSamples],
    comparisons: list[tuple[str, str]],
    machine: MachineNoise | None = None,
) -> set[str]:
    """The cells whose every comparison (baseline, cell) is decided at an interim look: they
    need no more rounds. A cell in no comparison is settled (a comparison with a cell that
    left the rounds is left out by the caller)."""
    open_cells = {
        key
        for a, b in comparisons
        if not decided(
            samples.get(a, ConfigSamples()),
            samples.get(b, ConfigSamples()),
            machine=machine,
        )
        for key in (a, b)
    }
    return set(samples) - open_cells
