#!/usr/bin/env python3
"""How `history check` does on series of 100 commits built from measured per-process noise:
commits until a step is found, false alerts per 100 commits without a step, and what
`history confirm` changes in both. Prints the figures (docs/bench/history_calibration.log is its
output; docs/guide/history.md quotes it).

The noise: every committed processes.csv with three processes or more (tests/fixtures, docs),
each config's per-process GPU-time medians divided by their geometric mean. A series is one
such config: each commit's K processes are drawn (with replacement) from its ratios, times 1,
or times 1 + step from the step's commit on. The step's commit is drawn from 30..90.

- Detection: the series is checked as CI would, once per commit from the step's on (the
  newest commit last); found when a change point lies within one commit of the step. Commits
  until detection count the step's commit as 1.
- False alerts: a series without a step, checked once per commit from the 4th to the 100th;
  an alert is a change point among the gate's window (the last RECENT commits) that no earlier
  alert lies within one commit of, in either direction.
- Confirmation: each alert is re-timed once: C fresh processes a side drawn from the config's
  ratios at the true levels of the two commits it re-times (one commit out from the change on
  each side, as `history confirm --reach 1` does), judged as `history confirm` judges them
  (profiler.analysis.verdict.compare on GPU time, unpaired: the ratios of two configs were not
  timed in one process; the command pairs them by round); an alert that is not slower or faster
  is dismissed, and its change is not alerted again.

    python scripts/history_calibration.py [--series 100] [--processes 3,5] [--seed 0]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from profiler.analysis.change_points import MAX_PVALUE, RECENT, WINDOW, detect  # noqa: E402
from profiler.analysis.verdict import compare  # noqa: E402
from profiler.runs.samples import read_samples  # noqa: E402

COMMITS = 100
STEPS = (0.02, 0.03, 0.05)
#: checks after the step's commit (commits until detection up to this)
LOOK = 10
#: confirmation re-times the commit this many before the change's last one, and this many after
#: its first (history confirm's default --reach): a change placed one commit off is still
#: between the two
CONFIRM_REACH = 1
#: confirmation's tolerance (history confirm --same-within default, as a fraction)
CONFIRM_TOLERANCE = 0.01


def noise_pools() -> dict[str, np.ndarray]:
    """Config -> its per-process GPU-time medians over their geometric mean."""
    pools = {}
    for path in sorted(
        [*ROOT.glob("tests/fixtures/**/processes.csv"), *ROOT.glob("docs/**/processes.csv")]
    ):
        medians = read_samples(path).medians("gpu_time")
        if len(medians) >= 3:
            values = np.asarray(medians)
            pools[str(path.parent.relative_to(ROOT))] = values / np.exp(np.log(values).mean())
    return pools


def levels(pool: np.ndarray, rng: np.random.Generator, k: int, true: np.ndarray) -> np.ndarray:
    """Each commit's geometric mean of k processes drawn from ``pool`` at its true level."""
    draws = rng.choice(pool, size=(len(true), k)) * true[:, None]
    return np.exp(np.log(draws).mean(axis=1))


def confirmed(pool, rng, c: int, before: float, after: float) -> bool:
    a = rng.choice(pool, size=c) * before
    b = rng.choice(pool, size=c) * after
    word = compare(a, b, figure="gpu_time", tolerance=CONFIRM_TOLERANCE).verdict
    return word in ("slower", "faster")


def alerts_over(values, first: int, last: int, max_pvalue: float):
    """Each new alert while the series is checked from commit ``first`` to ``last`` (1-based
    counts of commits): (commits seen when alerted, index of the change)."""
    seen: list[int] = []
    for n in range(first, last + 1):
        for index, _ in detect(values[:n], max_pvalue=max_pvalue, window=WINDOW):
            if index >= n - RECENT and all(abs(index - s) > 1 for s in seen):
                seen.append(index)
                yield n, index


def one_series(pool, rng, k: int, step: float, max_pvalue: float):
    """The series' step commit (None without a step) and its alerts: (commits seen, index,
    whether the change is the step, the true levels before and after it)."""
    start = int(rng.integers(30, 91)) if step else COMMITS
    true = np.where(np.arange(COMMITS) >= start, 1 + step, 1.0)
    values = levels(pool, rng, k, true)
    last = min(COMMITS, start + LOOK) if step else COMMITS
    alerts = [
        (
            n,
            index,
            bool(step) and abs(index - start) <= 1,
            true[max(index - 1 - CONFIRM_REACH, 0)],
            true[min(index + CONFIRM_REACH, n - 1)],
        )
        for n, index in alerts_over(values, start + 1 if step else 4, last, max_pvalue)
    ]
    return (start if step else None), alerts


def outcome(pool, rng, start, alerts, c: int | None):
    """(commits until the step is alerted, the step's commit counted as 1, or None; alerts
    kept), each alert confirmed with ``c`` processes a side (None: not confirmed)."""
    found, kept, dismissed = None, 0, []
    for n, index, real, before, after in alerts:
        if any(abs(index - d) <= 1 for d in dismissed):
            continue
        ok = c is None or confirmed(pool, rng, c, before, after)
        kept += ok
        if not ok:
            dismissed.append(index)
        elif real and found is None:
            found = n - start
    return found, kept


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--series", type=int, default=100, help="series per case")
    parser.add_argument("--processes", default="3,5", help="processes per commit, listed")
    parser.add_argument("--pvalues", default=f"{MAX_PVALUE}", help="detection levels, listed")
    parser.add_argument("--confirm", default="10", help="processes a side to confirm, listed")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    began = time.perf_counter()
    pools = noise_pools()
    names = list(pools)
    print(
        f"noise: {len(pools)} configs with 3+ processes, GPU time; {COMMITS} commits a series, "
        f"{args.series} series a case; Otava window {WINDOW}; gate window {RECENT} commits; "
        f"confirmation tolerance {CONFIRM_TOLERANCE:.0%}"
    )
    for name in names:
        pool = pools[name]
        print(f"  {name}: {len(pool)} processes, CV {pool.std(ddof=1) / pool.mean():.2%}")
    confirms = [None, *(int(v) for v in args.confirm.split(","))]
    print(
        "processes/commit | p-value | confirmation | false alerts/100 commits | "
        + " | ".join(f"{s:.0%} step: within 3 / within {LOOK} / median" for s in STEPS)
    )
    for k in (int(v) for v in args.processes.split(",")):
        for p in (float(v) for v in args.pvalues.split(",")):
            rng = np.random.default_rng(args.seed)
            cases = {
                step: [
                    one_series(pools[names[i % len(names)]], rng, k, step, p)
                    for i in range(args.series)
                ]
                for step in (0.0, *STEPS)
            }
            for c in confirms:
                crng = np.random.default_rng(args.seed + 1)
                cells = []
                for step, rows in cases.items():
                    results = [
                        outcome(pools[names[i % len(names)]], crng, start, alerts, c)
                        for i, (start, alerts) in enumerate(rows)
                    ]
                    if not step:
                        cells.append(f"{np.mean([r[1] for r in results]):.2f}")
                        continue
                    delays = [r[0] for r in results]
                    within = [d for d in delays if d is not None]
                    w3 = sum(d is not None and d <= 3 for d in delays) / len(delays)
                    med = f"{np.median(within):.0f}" if within else "-"
                    cells.append(f"{w3:.0%} / {len(within) / len(delays):.0%} / {med}")
                how = "none" if c is None else f"{c} a side"
                print(f"{k} | {p} | {how} | " + " | ".join(cells))
    print(f"took {time.perf_counter() - began:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
