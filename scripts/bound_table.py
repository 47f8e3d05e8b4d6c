"""How the committed GPU windows classify: launch-bound, near the launch bound or GPU-bound.

Reads every per-process window the repository keeps with latency, GPU time and enqueue per
iteration (the H100's raw verdict measurements under docs/gpu/h100/verdicts, the processes.csv
of the GPU fixtures under tests/fixtures) and prints, per config: the processes, each figure's
range of per-process medians, latency / GPU time and median enqueue / GPU time over the
processes, the words the rule gives each process (profiler.runs.samples.bound_word), the config's
figures (geometric means over its processes: latency / GPU time, enqueue / GPU time) and its
word, and the old rule's count (enqueue p90 >= 0.9 x GPU time p50). Then, over every process whose
median enqueue is below its GPU time, how latency / GPU time falls: the figures the thresholds
GPU_BOUND_RATIO and LAUNCH_LATENCY_RATIO were read from.

    python scripts/bound_table.py > docs/bench/bound_table.log
    python scripts/bound_table.py --only FOLDER ...   # the run folders under FOLDER alone (a
                                                      # sweep, or a runs folder: */processes.csv)
"""

from __future__ import annotations

import gzip
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from profiler.runs.samples import (  # noqa: E402
    BOUND_WORDS,
    GPU_BOUND_RATIO,
    LAUNCH_LATENCY_RATIO,
    ConfigSamples,
    ProcessWindow,
    read_samples,
)

RAW = (
    ("H100", "docs/gpu/h100/verdicts/pairs_raw.json.gz"),
    ("H100", "docs/gpu/h100/verdicts/real_raw.json.gz"),
)
FIXTURES = (
    ("H100", "tests/fixtures/h100x4_sweep/runs/g4"),
    ("H200", "tests/fixtures/llm_h200/runs"),
)
#: the old rule, for comparison: enqueue p90 at least this share of GPU time p50
OLD_SHARE = 0.9


def raw_configs(path: Path) -> Iterator[tuple[str, ConfigSamples]]:
    with gzip.open(path) as f:
        raw = json.loads(f.read())
    for key in raw["cells"]:
        windows = []
        for process in raw["processes"]:
            r = process["records"].get(key)
            if r and r.get("latencies_ms"):
                windows.append(
                    ProcessWindow(
                        tuple(r["latencies_ms"]),
                        tuple(r.get("gpu_ms") or ()),
                        tuple(r.get("enqueue_ms") or ()),
                    )
                )
        yield key, ConfigSamples(tuple(windows))


def fixture_configs(folder: Path) -> Iterator[tuple[str, ConfigSamples]]:
    for run in sorted(p.parent for p in folder.glob("*/processes.csv")):
        samples = read_samples(run / "processes.csv")
        phases = samples.phase_names
        if phases:
            for phase in phases:
                yield f"{run.name} {phase}", samples.phase(phase)
        else:
            yield run.name, samples


def span(values: list[float], digits: int = 3) -> str:
    return f"{min(values):.{digits}f}–{max(values):.{digits}f}"  # an en dash: no minus sign


def old_launch(w: ProcessWindow) -> bool:
    return float(np.percentile(w.enqueue_ms, 90)) >= OLD_SHARE * (w.median("gpu_time") or 0)


def main(argv: list[str]) -> None:
    print(
        f"rule: launch-bound where median enqueue >= GPU time or latency >= "
        f"{LAUNCH_LATENCY_RATIO:.2f} x GPU time; GPU-bound where latency <= "
        f"{GPU_BOUND_RATIO:.2f} x GPU time; near the launch bound between (medians of each "
        "process; a config: the rule on the geometric means of its processes' medians)"
    )
    header = (
        f"{'GPU':5} {'config':34} {'proc':>4} {'latency ms':>15} {'GPU ms':>15} "
        f"{'lat/GPU':>11} {'enq50/GPU':>11}  {'launch/near/GPU':>15}  {'old':>5}  "
        f"{'config: lat/GPU':>15} {'enq/GPU':>7}  word"
    )
    below: list[float] = []
    every: list[float] = []
    split: list[str] = []
    sources = [*RAW, *FIXTURES]
    if argv[:1] == ["--only"]:
        sources = [("given", folder) for folder in argv[1:]]
    for gpu, source in sources:
        path = ROOT / source
        print(f"\n## {gpu}: {source}")
        print(header)
        configs = raw_configs(path) if path.suffix == ".gz" else fixture_configs(path)
        for name, samples in configs:
            classified = [w for w in samples.windows if w.bound is not None]
            if not classified:
                continue
            lat = [w.median() or 0.0 for w in classified]
            gpu_ms = [w.median("gpu_time") or 0.0 for w in classified]
            enq = [w.median("enqueue") or 0.0 for w in classified]
            over = [a / g for a, g in zip(lat, gpu_ms)]
            enq_over = [e / g for e, g in zip(enq, gpu_ms)]
            below += [r for r, e in zip(over, enq_over) if e < 1]
            words = [w.bound for w in classified]
            if len(set(words)) > 1:
                split.append(
                    f"{gpu:5} {name[:34]:34} "
                    + "; ".join(
                        f"{word} {span([r for r, x in zip(over, words) if x == word])}"
                        for word in BOUND_WORDS
                        if word in words
                    )
                )
            every += over
            counts = samples.bound_counts()
            old = sum(map(old_launch, classified))
            latency, gpu_time, enqueue = samples.bound_figures() or (0.0, 1.0, 0.0)
            print(
                f"{gpu:5} {name[:34]:34} {len(classified):>4} {span(lat):>15} "
                f"{span(gpu_ms):>15} {span(over):>11} {span(enq_over, 2):>11}  "
                f"{'/'.join(str(counts[w]) for w in BOUND_WORDS):>15}  "
                f"{old:>2}/{len(classified):<2}  {latency / gpu_time:15.3f} "
                f"{enqueue / gpu_time:7.2f}  {samples.bound()}"
            )
    print("\n## configs whose processes differ: latency / GPU time of each word's processes")
    print("\n".join(split))
    edges = (1.02, GPU_BOUND_RATIO, LAUNCH_LATENCY_RATIO)
    print(
        f"\n## latency / GPU time of each process: all {len(every)}, and the {len(below)} "
        "whose median enqueue < GPU time"
    )
    low = -np.inf
    for high in (*edges, np.inf):
        n_all = sum(low <= r < high for r in every)
        n_below = sum(low <= r < high for r in below)
        print(f"[{low:.2f}, {high:.2f}): {n_all:3d} {n_below:3d}")
        low = high
    for name, values in (("all", every), ("enqueue < GPU time", below)):
        print(
            f"{name}: min {min(values):.3f}, median {np.median(values):.3f}, max {max(values):.3f}"
        )


if __name__ == "__main__":
    main(sys.argv[1:])
