#!/usr/bin/env python3
"""Print a Markdown table of the runs under runs/ (or the folders given): one row per result.json.

    python scripts/runs_table.py [runs/pytorch_fp32_bs8 ...]
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from profiler.runs import RESULT_FILE, is_leftover, read_result  # noqa: E402


def main(argv: list[str]) -> int:
    folders = [Path(a) for a in argv] or sorted(
        p for p in Path("runs").iterdir() if p.is_dir() and not is_leftover(p))
    rows = []
    for folder in folders:
        path = folder / RESULT_FILE
        if not path.is_file():
            continue
        r = read_result(path)
        t = r.timing
        gpu = (r.environment.gpu or {}).get("name", "CPU")
        rows.append((r.model, r.backend.name, r.batch_size, t.mean_ms, t.p50_ms, t.p90_ms,
                     t.p99_ms, t.throughput_samples_per_s, t.prepare_s + t.first_call_s, gpu))
    print("| model | backend | bs | mean ms | p50 ms | p90 ms | p99 ms | samples/s | prepare s | device |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---|")
    for m, b, bs, mean, p50, p90, p99, thr, prep, gpu in rows:
        print(f"| {m} | {b} | {bs} | {mean:.3f} | {p50:.3f} | {p90:.3f} | {p99:.3f} | {thr:.1f} "
              f"| {prep:.2f} | {gpu} |")
    return 0 if rows else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
