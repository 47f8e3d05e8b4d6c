#!/usr/bin/env python3
"""A history series commit by commit, and a split of it weighed against its between-commit
spread: what `history check` sees when it finds no change point (docs/gpu/h200/history).

For each commit of one config's series (profiler.analysis.change_points): its processes, its
level on GPU time and on latency (the geometric mean of its per-process medians, the value the
detection runs on), and its GPU-time level against the mean of its neighbours' (one each side).
With --split COMMIT, the commits from COMMIT on against those before it:

- the size: `history check`'s verdict on GPU time and on latency (the ratio of the geometric
  means of the per-process medians, its 95 % interval, unpaired: profiler.analysis.verdict);
- the between-commit spread: the standard deviation of the commit levels on each side, in % of
  that side's mean, and the step in units of the larger; beside it, the spread of the processes
  within a commit (the pooled standard deviation of the log medians, in %) and what that alone
  would give the commit levels (divided by the square root of a commit's processes);
- the categories and the kernels whose time per profiled step moved most across the split, as
  `history check` names a change's cause (up to CAUSE_COMMITS commits each side);
- Apache Otava's t-test on the commit levels at that split (its TTestSignificanceTester, the
  test that keeps or drops a candidate change point), against the detection's p < MAX_PVALUE.

    python scripts/history_levels.py DB [--config KEY] [--split COMMIT]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from profiler.analysis.change_points import (  # noqa: E402
    CAUSE_COMMITS,
    MAX_PVALUE,
    Commit,
    commits_of,
    shifts,
)
from profiler.analysis.records import FigureName  # noqa: E402
from profiler.analysis.verdict import compare  # noqa: E402
from profiler.runs.history_store import config_counts, read_records  # noqa: E402


def pct(ratio: float) -> str:
    return f"{(ratio - 1) * 100:+.1f} %"


def neighbours(levels: list[float], i: int) -> float | None:
    """Level i against the mean of its neighbours' (one each side; one at an end)."""
    near = [levels[j] for j in (i - 1, i + 1) if 0 <= j < len(levels)]
    return levels[i] / float(np.mean(near)) if near else None


def within(commit: Commit) -> float | None:
    """The standard deviation of the log of a commit's per-process GPU-time medians (about the
    coefficient of variation); None with fewer than 2 processes."""
    medians = commit.medians("gpu_time")
    return float(np.std(np.log(medians), ddof=1)) if len(medians) >= 2 else None


def pooled_within(commits: list[Commit]) -> tuple[float, float] | None:
    """(the pooled within-commit standard deviation of the log medians, the mean processes a
    commit) over the commits with 2 processes or more."""
    rows: list[tuple[int, float]] = []
    for c in commits:
        sd = within(c)
        if sd is not None:
            rows.append((len(c.medians("gpu_time")), sd))
    if not rows:
        return None
    dof = sum(k - 1 for k, _ in rows)
    pooled = (sum((k - 1) * sd**2 for k, sd in rows) / dof) ** 0.5
    return pooled, float(np.mean([k for k, _ in rows]))


def print_split(commits: list[Commit], split: str) -> None:
    names = [c.commit for c in commits]
    if split not in names or not 2 <= names.index(split) <= len(names) - 2:
        sys.exit(f"error: --split {split}: not a commit with 2 or more commits each side")
    at = names.index(split)
    before, after = commits[:at], commits[at:]
    print(f"split {names[at - 1]} | {split}: {len(before)} commit(s) before, {len(after)} after")
    figures: tuple[tuple[FigureName, str], ...] = (("gpu_time", "GPU time"), ("latency", "latency"))
    for figure, words in figures:
        a = [m for c in before for m in c.medians(figure)]
        b = [m for c in after for m in c.medians(figure)]
        v = compare(a, b, figure=figure)
        print(
            f"  {words}: after/before {v.ratio:.3f} ({pct(v.ratio)}), 95 % interval "
            f"[{pct(v.low)}, {pct(v.high)}] over {len(a)} vs {len(b)} processes: {v.verdict}"
        )
    levels = [[c.level("gpu_time") or 0.0 for c in side] for side in (before, after)]
    sds = [float(np.std(side, ddof=1)) / float(np.mean(side)) for side in levels]
    step = float(np.mean(levels[1])) / float(np.mean(levels[0]))
    print(
        f"  GPU-time commit levels: mean {np.mean(levels[0]):.4f} ms before, "
        f"{np.mean(levels[1]):.4f} ms after ({pct(step)}); between-commit standard deviation "
        f"{sds[0] * 100:.1f} % before, {sds[1] * 100:.1f} % after; the step is "
        f"{abs(step - 1) / max(sds):.1f} of the larger"
    )
    for kind, top in (("category", 3), ("kernel", 3)):
        for s in shifts(before, after, kind, top=top):
            print(
                f"  {kind} {s.label}: {s.before_us:.1f} -> {s.after_us:.1f} µs/step "
                f"({s.delta_us:+.1f} µs, spread {s.spread_us:.1f} µs; calls {s.before_calls:.1f} "
                f"-> {s.after_calls:.1f}), the {CAUSE_COMMITS} commits nearest each side"
            )
    process = pooled_within(commits)
    if process is not None:
        sd, k = process
        print(
            f"  within a commit: the processes' GPU-time medians spread {sd * 100:.1f} % "
            f"(pooled standard deviation over {len(commits)} commits), which alone would spread "
            f"commit levels of {k:.0f} processes {sd / k**0.5 * 100:.1f} %"
        )
    try:
        from otava.analysis import TTestSignificanceTester
    except ImportError:
        print("  (no apache-otava here: its t-test is not computed)")
        return
    p = TTestSignificanceTester(MAX_PVALUE).compare(levels[0], levels[1]).pvalue
    print(
        f"  Otava's t-test on the GPU-time commit levels at this split: p = {p:.2g} "
        f"(a change point is kept at p < {MAX_PVALUE})"
    )


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("db", type=Path)
    parser.add_argument("--config", help="the config key (default: the database's only one)")
    parser.add_argument("--split", help="weigh the commits from this one on against the rest")
    args = parser.parse_args(argv)
    if not args.db.is_file():
        sys.exit(f"error: {args.db}: no such file")
    keys = list(config_counts(args.db))
    if args.config is None and len(keys) != 1:
        sys.exit(f"error: {len(keys)} configs in {args.db}: pass --config (one of {keys[:5]})")
    key = args.config or keys[0]
    if key not in keys:
        sys.exit(f"error: no config {key!r} in {args.db}")
    commits = commits_of(read_records(args.db, key))
    print(f"{key}: {len(commits)} commit(s); a level is the geometric mean of per-process medians")
    levels = [c.level("gpu_time") or 0.0 for c in commits]
    print("commit  processes  GPU time     vs neighbours  processes' spread  latency")
    for i, c in enumerate(commits):
        near = neighbours(levels, i)
        latency = c.level("latency")
        sd = within(c)
        print(
            f"{c.commit:<7} {len(c.medians('gpu_time')):>9}  {levels[i]:.4f} ms  "
            f"{pct(near) if near else '':>13}  "
            + (f"{sd * 100:>15.1f} %  " if sd is not None else f"{'-':>17}  ")
            + (f"{latency:.3f} ms" if latency is not None else "-")
        )
    if args.split:
        print_split(commits, args.split)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
