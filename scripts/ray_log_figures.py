"""Sums and means over the placement table of a `scripts/device_ray.sh` log.

Reads the Ray sweep's placement table (cell, status, node, gpu, seconds, worker) and the
`<sweep>: wall N s` lines, and prints the seconds inside the cells per GPU and in all, a cell's
mean, how much of the Ray sweep's wall time lies outside the cells of its busiest GPU, and the
local executor's GPU seconds a cell (its wall time x GPUs / cells).

    python scripts/ray_log_figures.py docs/gpu/h200x2/device_ray.log
"""

from __future__ import annotations

import re
import sys
from collections import defaultdict
from pathlib import Path

ROW = re.compile(
    r"^(?P<cell>\S+)\s+(?P<status>\w+)\s+(?P<node>\S+)\s+(?P<gpu>\d+)\s+"
    r"(?P<seconds>\d+(?:\.\d+)?)\s+ray node "
)
WALL = re.compile(r"^(?P<sweep>\w+): wall (?P<wall>\d+(?:\.\d+)?) s, (?P<ok>\d+)/(?P<n>\d+) cells")


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python scripts/ray_log_figures.py DEVICE_RAY_LOG", file=sys.stderr)
        return 2
    try:
        text = Path(argv[0]).read_text()
    except OSError as err:
        print(f"error: cannot read {argv[0]}: {err.strerror}", file=sys.stderr)
        return 1
    per_gpu: dict[int, list[float]] = defaultdict(list)
    for line in text.splitlines():
        if match := ROW.match(line):
            per_gpu[int(match["gpu"])].append(float(match["seconds"]))
    walls = {
        m["sweep"]: (float(m["wall"]), int(m["n"])) for m in map(WALL.match, text.splitlines()) if m
    }
    if not per_gpu or "ray_executor" not in walls:
        print(f"error: no placement table or ray_executor wall line in {argv[0]}", file=sys.stderr)
        return 1
    cells = [s for seconds in per_gpu.values() for s in seconds]
    total = sum(cells)
    print(
        f"placement table: {len(cells)} cells on {len(per_gpu)} GPU(s), "
        f"{min(cells):.1f}-{max(cells):.1f} s a cell"
    )
    for gpu in sorted(per_gpu):
        print(f"GPU {gpu}: {len(per_gpu[gpu])} cells, {sum(per_gpu[gpu]):.1f} s inside the cells")
    print(f"all GPUs: {total:.1f} s inside the cells, {total / len(cells):.2f} s a cell (mean)")
    ray_wall = walls["ray_executor"][0]
    busiest = max(sum(s) for s in per_gpu.values())
    print(
        f"ray_executor: wall {ray_wall:.1f} s, busiest GPU {busiest:.1f} s inside the cells, "
        f"{ray_wall - busiest:.1f} s outside them"
    )
    if "local_executor" in walls:
        local_wall, n = walls["local_executor"]
        local = local_wall * len(per_gpu) / n
        print(
            f"local_executor: wall {local_wall:.1f} s x {len(per_gpu)} GPU(s) / {n} cells = "
            f"{local:.2f} s a cell; Ray's mean a cell less that: "
            f"{total / len(cells) - local:.2f} s"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
