"""How fast is `profile.py summarize` on a GB-sized trace, and how much memory does it take?

Builds a large trace by replicating the steps of a real fixture (timestamps shifted so the copies
follow each other, correlation / External ids / flow ids shifted so they stay distinct, step
numbers continued), writes it to /tmp, then runs `python profile.py summarize TRACE` (every
table, printed to a file) in a fresh process --repeat times and prints the median wall seconds
and peak RSS beside the targets. The default fixture is an eager FP16 ResNet50 trace recorded
on an H100 with --with-stack --profile-memory --record-shapes (tests/fixtures/h100_stacks/), the
shape of trace users record; --v100 uses the 2021 V100 fixture instead. With --hta-python, also
times Holistic Trace Analysis' kernel breakdown on the same file in its own venv.

    python scripts/bench_summarize.py --size-gb 1.0
    python scripts/bench_summarize.py --reuse --repeat 3
    python scripts/bench_summarize.py --v100 --hta-python /tmp/hta-venv/bin/python
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_FIXTURE = REPO / "tests/fixtures/h100_stacks/h100_pytorch_fp16_bs8_stacks.pt.trace.json.gz"
V100_FIXTURE = REPO / "tests/fixtures/kineto_tb_plugin/worker0.1623143089861.pt.trace.json.gz"
TARGET_S, TARGET_GB = 6.0, 2.5  # issue 12: a 1 GB with-stack/profile-memory trace, 2 cores
#: trace header flags -> what the benchmark line calls them
RECORDED = {"with_stack": "stack", "profile_memory": "memory", "record_shapes": "shapes"}
ID_KEYS = ("correlation", "External id", "external id")


def read_fixture(fixture: Path) -> dict:
    raw = fixture.read_bytes()
    return json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)


def event_mix(fixture: Path) -> None:
    """Print the fixture's events by ph and cat: counts and shares of events and of event
    bytes (json.dumps of each event)."""
    events = read_fixture(fixture)["traceEvents"]
    counts: dict[tuple[str, str], list[int]] = {}
    for e in events:
        row = counts.setdefault((str(e.get("ph", "")), str(e.get("cat", "(none)"))), [0, 0])
        row[0] += 1
        row[1] += len(json.dumps(e))
    n, size = len(events), sum(b for _, b in counts.values())
    print(f"event mix of {fixture.name}:")
    print(f"{'ph':3s} {'cat':20s} {'events':>8s} {'% events':>9s} {'% bytes':>8s}")
    for (ph, cat), (count, nbytes) in sorted(counts.items(), key=lambda kv: -kv[1][0]):
        print(
            f"{ph:3s} {cat:20s} {count:8,d} {100 * count / n:8.1f} % {100 * nbytes / size:6.1f} %"
        )
    print(f"all: {n:,} events, {size:,} bytes (json.dumps of each event)")


def build(fixture: Path, out: Path, size_gb: float) -> tuple[int, int, dict]:
    data = read_fixture(fixture)
    events = data.pop("traceEvents")
    timed = [e for e in events if isinstance(e.get("ts"), (int, float))]
    t0 = min(e["ts"] for e in timed)
    t1 = max(e["ts"] + e.get("dur", 0) for e in timed)
    shift_t = (t1 - t0) + 1000
    max_id = max(
        [
            e.get("args", {}).get(k, 0) or 0
            for e in events
            for k in ID_KEYS
            if isinstance(e.get("args"), dict)
        ]
        + [e.get("id", 0) for e in events if isinstance(e.get("id"), int)]
    )
    shift_id = max_id + 1
    steps = sorted(
        {
            int(e["name"].split("#")[1])
            for e in events
            if str(e.get("name", "")).startswith("ProfilerStep#")
        }
    )
    n_steps = (max(steps) - min(steps) + 1) if steps else 0
    head = json.dumps(data)[:-1]
    target = size_gb * 1e9
    written = copies = 0
    counted = {"events": 0, "complete events": 0, "kernels": 0}
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
                counted["events"] += 1
                counted["complete events"] += e.get("ph") == "X"
                counted["kernels"] += (
                    e.get("ph") == "X" and str(e.get("cat", "")).lower() == "kernel"
                )  # "Kernel" in 2021 traces
            text = (",\n" if not first else "") + ",\n".join(chunk)
            first = False
            f.write(text)
            written += len(text)
            copies += 1
        f.write("\n]}\n")
    counted["profiled steps"] = n_steps * copies
    return copies, out.stat().st_size, counted


_MEASURE = """
import resource, subprocess, sys, time
from pathlib import Path

def tree_rss_kb(pid):
    # resident KB of a process and its descendants (the forked reader of a large trace)
    try:
        kb = int(next(l for l in Path(f"/proc/{pid}/status").read_text().splitlines()
                      if l.startswith("VmRSS:")).split()[1])
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except (OSError, StopIteration):
        return 0
    return kb + sum(tree_rss_kb(int(c)) for c in children)

proc = subprocess.Popen(sys.argv[1:])
together = 0
while proc.poll() is None:
    together = max(together, tree_rss_kb(proc.pid))
    time.sleep(0.02)
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
print(usage.ru_maxrss, proc.returncode, together, round(1000 * (usage.ru_utime + usage.ru_stime)),
      file=sys.stderr)
"""


def timed(cmd: list[str], timeout: int | None = None) -> tuple[float, float, int]:
    """Wall seconds, peak RSS (GB) and exit status of one command, run under a small wrapper
    so each command's peak is its own (ru_maxrss of the wrapper's children)."""
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", _MEASURE, *cmd],
        cwd=REPO,
        timeout=timeout,
        stderr=subprocess.PIPE,
        text=True,
    )
    wall = time.perf_counter() - start
    lines = proc.stderr.strip().splitlines()
    sys.stderr.write("\n".join(lines[:-1]) + ("\n" if len(lines) > 1 else ""))
    peak_kb, rc, _, _ = (int(x) for x in lines[-1].split())
    return wall, peak_kb / 1e6, rc


PHASES_CODE = """
import contextlib, io, resource, sys, time
cpu, wall = time.process_time(), time.perf_counter()
def lap(name):
    global cpu, wall
    c, w = time.process_time(), time.perf_counter()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6
    print(f"  {name:9s} {c - cpu:5.2f} s CPU (this process) {w - wall:5.2f} s wall, "
          f"peak RSS so far {peak:.2f} GB")
    cpu, wall = c, w
from profiler.analysis.run_analysis import RunAnalysis
from profiler.report.console import make_console
from profiler.report.sections import Context, print_sections, summarize_rows
lap("imports")
run = RunAnalysis(sys.argv[1])
trace = run.trace
lap("load")
summary = run.summary
lap("analyses")
with contextlib.redirect_stdout(io.StringIO()):
    print_sections(summarize_rows("all"), Context(run, make_console()))
lap("render")
"""

HTA_CODE = """
import sys, time
from hta.trace_analysis import TraceAnalysis
t = time.perf_counter()
analyzer = TraceAnalysis(trace_dir=sys.argv[1])
kernel_type, kernels = analyzer.get_gpu_kernel_breakdown(visualize=False)
print(f"  HTA kernel breakdown: {len(kernels)} rows ({time.perf_counter() - t:.1f} s in process)")
"""


def summarize_cli(trace: Path, repeat: int) -> tuple[list, list, list, list, str]:
    """Wall seconds, CPU seconds (all processes), peak RSS of the largest process and of all
    processes together (GB, /proc sampled every 20 ms; shared pages counted in each) of
    ``repeat`` runs of `profile.py summarize TRACE`, and what the last one printed."""
    walls, cpus, peaks, together = [], [], [], []
    printed = Path(tempfile.mkstemp(prefix="bench_summarize_", suffix=".txt")[1])
    for _ in range(repeat):
        with open(printed, "w") as out:  # (the wrapper's stdout: the printed tables)
            start = time.perf_counter()
            proc = subprocess.run(
                [
                    sys.executable,
                    "-c",
                    _MEASURE,
                    sys.executable,
                    str(REPO / "profile.py"),
                    "summarize",
                    str(trace),
                ],
                cwd=REPO,
                stdout=out,
                stderr=subprocess.PIPE,
                text=True,
                env=dict(os.environ, COLUMNS="200"),
            )
            walls.append(time.perf_counter() - start)
        peak_kb, rc, together_kb, cpu_ms = (
            int(x) for x in proc.stderr.strip().splitlines()[-1].split()
        )
        if rc:
            sys.exit(f"summarize failed (exit {rc}): {proc.stderr.strip()}")
        peaks.append(peak_kb / 1e6)
        together.append(max(together_kb, peak_kb) / 1e6)
        cpus.append(cpu_ms / 1e3)
    text = printed.read_text()
    printed.unlink()
    return walls, cpus, peaks, together, text


def recorded_with(trace: Path) -> str:
    """'stack/memory/shapes' (those the trace header says were recorded)."""
    with open(trace, "rb") as f:
        head = f.read(4096).decode("utf-8", "replace")
    found = [what for flag, what in RECORDED.items() if re.search(rf'"{flag}":\s*1\b', head)]
    return "/".join(found) or "no stack/memory/shapes"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fixture", type=Path, default=DEFAULT_FIXTURE)
    parser.add_argument(
        "--v100",
        action="store_true",
        help="Replicate the 2021 V100 fixture (the earlier default) instead.",
    )
    parser.add_argument("--size-gb", type=float, default=1.0)
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="Folder for the built trace (default /tmp/bench_trace_<fixture>).",
    )
    parser.add_argument("--reuse", action="store_true", help="Reuse a trace already built.")
    parser.add_argument("--repeat", type=int, default=3, help="Timed runs (median reported).")
    parser.add_argument(
        "--phases",
        action="store_true",
        help="Also time imports, load, analyses and rendering in one process.",
    )
    parser.add_argument(
        "--hta-python",
        default=None,
        help="Python of a venv with HolisticTraceAnalysis (e.g. /tmp/hta-venv/bin/python).",
    )
    parser.add_argument("--hta-timeout", type=int, default=900)
    parser.add_argument(
        "--event-mix",
        action="store_true",
        help="Only print the fixture's events by ph and cat (counts, shares of events and bytes).",
    )
    args = parser.parse_args()
    fixture = V100_FIXTURE if args.v100 else args.fixture
    if args.event_mix:
        event_mix(fixture)
        return
    out = args.out or Path(f"/tmp/bench_trace_{fixture.name.split('.')[0]}")

    out.mkdir(parents=True, exist_ok=True)
    trace = out / "rank0.pt.trace.json"
    if not (args.reuse and trace.exists()):
        start = time.perf_counter()
        copies, size, counted = build(fixture, trace, args.size_gb)
        print(
            f"built {trace}: {size / 1e9:.2f} GB, {copies} copies of {fixture.name} "
            f"({time.perf_counter() - start:.0f} s)"
        )
        print("  " + ", ".join(f"{n:,} {what}" for what, n in counted.items()))
    size = trace.stat().st_size
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(
        f"machine: {os.cpu_count()} CPUs, load average {load} before timing; trace "
        f"{size / 1e9:.2f} GB"
    )

    walls, cpus, peaks, together, printed = summarize_cli(trace, args.repeat)
    steps = re.search(r"\bsteps\b\W+([\d,]+)", printed)
    print(
        f"runs: {' / '.join(f'{w:.1f}' for w in walls)} s wall, "
        f"{' / '.join(f'{c:.1f}' for c in cpus)} s CPU (all processes); peak RSS "
        f"{' / '.join(f'{p:.2f}' for p in peaks)} GB the largest process, "
        f"{' / '.join(f'{p:.2f}' for p in together)} GB all processes together"
    )
    print(
        f"summarize {size / 1e9:.1f} GB trace ({steps.group(1) if steps else '?'} steps, with "
        f"{recorded_with(trace)}): {statistics.median(walls):.1f} s (target <= {TARGET_S:g} s), "
        f"peak RSS {statistics.median(together):.1f} GB (target <= {TARGET_GB:g} GB)"
    )
    if args.phases:
        print(
            "where one run's seconds go (in one process; the loader's forked child not counted "
            "in CPU):",
            flush=True,
        )
        subprocess.run([sys.executable, "-c", PHASES_CODE, str(trace)], cwd=REPO, check=True)
    if args.hta_python:
        try:
            hta_wall, hta_rss, hta_rc = timed(
                [args.hta_python, "-c", HTA_CODE, str(out)], timeout=args.hta_timeout
            )
            print(
                f"Holistic Trace Analysis kernel breakdown: {hta_wall:.1f} s wall, "
                f"{hta_rss:.2f} GB peak RSS (exit {hta_rc}); ratio "
                f"{hta_wall / statistics.median(walls):.0f}x slower"
            )
        except subprocess.TimeoutExpired:
            print(f"Holistic Trace Analysis: no result within {args.hta_timeout} s")


if __name__ == "__main__":
    main()
