"""How fast is a full trace summary on a GB-sized trace, and how much memory does it take?

Builds a large trace by replicating the steps of a real fixture (timestamps shifted so the copies
follow each other, correlation / External ids / flow ids shifted so they stay distinct, step
numbers continued), writes it to /tmp, then times a full summary (every table) in a fresh
subprocess and reports wall seconds and peak RSS. With --hta-python, also times Holistic Trace
Analysis' kernel breakdown on the same file in its own venv and prints the ratio.

    python scripts/bench_summarize.py --size-gb 1.0
    python scripts/bench_summarize.py --hta-python /tmp/hta-venv/bin/python
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_FIXTURE = REPO / "tests/fixtures/kineto_tb_plugin/worker0.1623143089861.pt.trace.json.gz"
ID_KEYS = ("correlation", "External id", "external id")


def build(fixture: Path, out: Path, size_gb: float) -> tuple[int, int]:
    raw = fixture.read_bytes()
    data = json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
    events = data.pop("traceEvents")
    timed = [e for e in events if isinstance(e.get("ts"), (int, float))]
    t0 = min(e["ts"] for e in timed)
    t1 = max(e["ts"] + e.get("dur", 0) for e in timed)
    shift_t = (t1 - t0) + 1000
    max_id = max([e.get("args", {}).get(k, 0) or 0 for e in events for k in ID_KEYS
                  if isinstance(e.get("args"), dict)] + [e.get("id", 0) for e in events
                                                          if isinstance(e.get("id"), int)])
    shift_id = max_id + 1
    steps = sorted({int(e["name"].split("#")[1]) for e in events
                    if str(e.get("name", "")).startswith("ProfilerStep#")})
    n_steps = (max(steps) - min(steps) + 1) if steps else 0
    head = json.dumps(data)[:-1]
    target = size_gb * 1e9
    written = copies = 0
    with open(out, "w") as f:
        f.write(head + (", " if data else "") + '"traceEvents": [\n')
        first = True
        while written < target:
            chunk = []
            for e in events:
                if e.get("ph") == "M" and copies:
                    continue
                if e.get("cat") == "Trace" and copies:
                    continue
                e = dict(e)
                if isinstance(e.get("ts"), (int, float)):
                    e["ts"] = e["ts"] + copies * shift_t
                if isinstance(e.get("id"), int):
                    e["id"] = e["id"] + copies * shift_id
                args = e.get("args")
                if isinstance(args, dict):
                    args = dict(args)
                    for k in ID_KEYS:
                        if isinstance(args.get(k), int):
                            args[k] = args[k] + copies * shift_id
                    e["args"] = args
                name = e.get("name", "")
                if n_steps and isinstance(name, str) and name.startswith("ProfilerStep#"):
                    e["name"] = f"ProfilerStep#{int(name.split('#')[1]) + copies * n_steps}"
                chunk.append(json.dumps(e))
            text = (",\n" if not first else "") + ",\n".join(chunk)
            first = False
            f.write(text)
            written += len(text)
            copies += 1
        f.write("\n]}\n")
    return copies, out.stat().st_size


_MEASURE = """
import resource, subprocess, sys
rc = subprocess.run(sys.argv[1:]).returncode
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, rc, file=sys.stderr)
"""


def timed(cmd: list[str], timeout: int | None = None) -> tuple[float, float, int]:
    """Wall seconds, peak RSS (GB) and exit status of one command, run under a small wrapper
    so each command's peak is its own (ru_maxrss of the wrapper's children)."""
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", _MEASURE, *cmd], cwd=REPO, timeout=timeout,
                          stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - start
    lines = proc.stderr.strip().splitlines()
    sys.stderr.write("\n".join(lines[:-1]) + ("\n" if len(lines) > 1 else ""))
    peak_kb, rc = (int(x) for x in lines[-1].split())
    return wall, peak_kb / 1e6, rc


SUMMARY_CODE = """
import sys, time
from profiler.trace.summary import summarize
t = time.perf_counter()
s = summarize(sys.argv[1])
print(f"  summary: {len(s.kernels.table)} kernel names, {s.kernels.table['calls'].sum():,} kernels,"
      f" {len(s.overview.steps)} steps, GPU util "
      f"{s.overview.devices[0].gpu_utilization_pct if s.overview.devices else 0:.1f} %"
      f" ({time.perf_counter() - t:.1f} s in process)")
"""

HTA_CODE = """
import sys, time
from hta.trace_analysis import TraceAnalysis
t = time.perf_counter()
analyzer = TraceAnalysis(trace_dir=sys.argv[1])
kernel_type, kernels = analyzer.get_gpu_kernel_breakdown(visualize=False)
print(f"  HTA kernel breakdown: {len(kernels)} rows ({time.perf_counter() - t:.1f} s in process)")
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fixture", type=Path, default=DEFAULT_FIXTURE)
    parser.add_argument("--size-gb", type=float, default=1.0)
    parser.add_argument("--out", type=Path, default=Path("/tmp/bench_trace"))
    parser.add_argument("--reuse", action="store_true", help="Reuse a trace already built.")
    parser.add_argument("--hta-python", default=None,
                        help="Python of a venv with HolisticTraceAnalysis (e.g. /tmp/hta-venv/bin/python).")
    parser.add_argument("--hta-timeout", type=int, default=900)
    args = parser.parse_args()

    args.out.mkdir(parents=True, exist_ok=True)
    trace = args.out / "rank0.pt.trace.json"
    if not (args.reuse and trace.exists()):
        start = time.perf_counter()
        copies, size = build(args.fixture, trace, args.size_gb)
        print(f"built {trace}: {size / 1e9:.2f} GB, {copies} copies of {args.fixture.name} "
              f"({time.perf_counter() - start:.0f} s)")
    size = trace.stat().st_size
    print(f"machine: {os.cpu_count()} CPUs; trace {size / 1e9:.2f} GB")

    wall, rss, rc = timed([sys.executable, "-c", SUMMARY_CODE, str(trace)])
    print(f"profiler summarize: {wall:.1f} s wall, {rss:.2f} GB peak RSS (exit {rc})")
    if args.hta_python:
        try:
            hta_wall, hta_rss, hta_rc = timed([args.hta_python, "-c", HTA_CODE, str(args.out)],
                                              timeout=args.hta_timeout)
            print(f"Holistic Trace Analysis kernel breakdown: {hta_wall:.1f} s wall, "
                  f"{hta_rss:.2f} GB peak RSS (exit {hta_rc}); ratio {hta_wall / wall:.0f}x "
                  "slower")
        except subprocess.TimeoutExpired:
            print(f"Holistic Trace Analysis: no result within {args.hta_timeout} s")


if __name__ == "__main__":
    main()
