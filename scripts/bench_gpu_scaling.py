"""How a sweep scales with the GPUs of one host, and whether its verdicts depend on them.

    python scripts/bench_gpu_scaling.py g1=runs/g1 g2=runs/g2 g4=runs/g4

Each argument is LABEL=SWEEP_FOLDER, the first the reference (one GPU); or LABEL=LOG, the
sweep's printed output (its `sweep took` line and its table, figures as printed: rounded; no
per-GPU offsets), for a sweep whose folder was lost. Prints each sweep's wall
time (sweep.json's wall_s) and its ratio to the first; per cell the GPU-time and latency
speedups with their 95 % intervals and verdicts in every sweep; whether each GPU-time verdict
is the same in all sweeps and each speedup inside the others' intervals; how often the latency
verdicts differ; and each sweep's per-GPU offsets. Reads the sweeps' benchmark.csv and
sweep.json; runs nothing. scripts/device_gpu_scaling.sh makes the sweeps on a GPU machine.
"""

from __future__ import annotations

import math
import re
import sys
from pathlib import Path
from types import SimpleNamespace

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from profiler.analysis.benchmark import sweep_gpu_offsets  # noqa: E402
from profiler.report.benchmark_view import gpu_offset_lines  # noqa: E402
from profiler.runs.manifest import read_manifest  # noqa: E402

FIGURES = {
    "GPU time": ("gpu_speedup", "gpu_speedup_low", "gpu_speedup_high", "gpu_verdict"),
    "latency": ("speedup", "speedup_low", "speedup_high", "verdict"),
}


_VERDICT = re.compile(r"([\d.]+)x \[([\d.]+)-([\d.]+)\] (\w+)")


def _verdict_cells(text: str, prefix: str) -> dict:
    names = [
        f"{prefix}speedup",
        f"{prefix}speedup_low",
        f"{prefix}speedup_high",
        f"{prefix.rstrip('_') + '_' if prefix else ''}verdict",
    ]
    if text.endswith("baseline"):
        return dict(zip(names, [1.0, 1.0, 1.0, "baseline"]))
    found = _VERDICT.search(text)
    if not found:
        return dict(zip(names, [math.nan, math.nan, math.nan, None]))
    return dict(zip(names, [*map(float, found.groups()[:3]), found.group(4)]))


def from_log(label: str, path: Path):
    """A sweep's printed output: its wall time and its table's rows (GPUs, backend, bs, then
    the latency and GPU-time verdict columns last)."""
    text = path.read_text()
    took = re.search(r"sweep took (?:(\d+) min )?([\d.]+) s", text)
    if took is None:
        sys.exit(f"error: {path} has no `sweep took` line")
    wall = 60 * float(took.group(1) or 0) + float(took.group(2))
    rows = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("│").split("│")]
        if len(cells) < 5 or not cells[2].isdigit():
            continue
        rows.append(
            {
                "gpus": cells[0],
                "backend": cells[1],
                "bs": int(cells[2]),
                **_verdict_cells(cells[-2], ""),
                **_verdict_cells(cells[-1], "gpu_"),
            }
        )
    return label, None, SimpleNamespace(wall_s=wall), pd.DataFrame(rows)


def load(arg: str):
    label, _, folder = arg.partition("=")
    folder = Path(folder)
    if folder.is_file():
        return from_log(label, folder)
    manifest = read_manifest(folder)
    if manifest is None:
        sys.exit(f"error: {folder} holds no sweep.json")
    frame = pd.read_csv(folder / "benchmark.csv", dtype={"gpu": str, "gpus": str})
    return label, folder, manifest, frame


def cell_text(row, columns) -> str:
    speedup, low, high, verdict = (row[c] for c in columns)
    if isinstance(verdict, str) and verdict == "baseline":
        return "baseline"
    if not isinstance(verdict, str) or math.isnan(speedup):
        return "-"
    return f"{speedup:.3f}x [{low:.3f}-{high:.3f}] {verdict}"


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__)
        return 2
    sweeps = [load(arg) for arg in argv]
    ref_wall = sweeps[0][2].wall_s
    print("== wall time (sweep.json wall_s: the cells and the sampling rounds)")
    for label, _, manifest, frame in sweeps:
        gpus = sorted({g for gs in frame["gpus"].dropna() for g in str(gs).split(";") if g})
        print(
            f"{label}: {manifest.wall_s:.1f} s, {manifest.wall_s / ref_wall:.2f} x "
            f"{sweeps[0][0]}'s; {len(frame)} cells; windows on GPUs {','.join(gpus) or '-'}"
        )
    keys = [(r.backend, int(r.bs)) for r in sweeps[0][3].itertuples()]
    for figure, columns in FIGURES.items():
        print(f"\n== {figure}: speedup against the baseline [95 % interval] verdict")
        differ, judged, outside, furthest = 0, 0, 0, 0.0
        for backend, bs in keys:
            rows = [
                frame[(frame["backend"] == backend) & (frame["bs"] == bs)].iloc[0]
                for _, _, _, frame in sweeps
            ]
            texts = [cell_text(row, columns) for row in rows]
            if texts[0] == "baseline" or all(text == "-" for text in texts):
                continue
            judged += 1
            words = {str(row[columns[3]]) for row in rows}
            inside = all(
                other[columns[1]] <= row[columns[0]] <= other[columns[2]]
                for row in rows
                for other in rows
                if other is not row
            )
            differ += len(words) > 1
            outside += not inside
            furthest = max(
                [
                    furthest,
                    *(
                        max(
                            other[columns[1]] / row[columns[0]] - 1,
                            row[columns[0]] / other[columns[2]] - 1,
                        )
                        for row in rows
                        for other in rows
                        if other is not row
                    ),
                ]
            )
            marks = ("" if len(words) == 1 else " VERDICTS DIFFER") + (
                "" if inside else " OUTSIDE AN INTERVAL"
            )
            print(
                f"{backend} bs {bs}: "
                + " | ".join(f"{label} {text}" for (label, *_), text in zip(sweeps, texts))
                + marks
            )
        print(
            f"{figure}: verdicts differ between the sweeps in {differ} of {judged} cells; a "
            f"speedup outside another sweep's interval in {outside} of {judged}"
            + (f", by at most {100 * furthest:.2f} %" if outside else "")
        )
    print("\n== per-GPU offsets (each sweep's windows)")
    for label, folder, manifest, _ in sweeps:
        if folder is None:
            print(f"{label}: not in its printed output")
            continue
        lines = gpu_offset_lines(sweep_gpu_offsets(folder, manifest))
        print(f"{label}: " + ("\n    ".join(lines) if lines else "one GPU"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
