"""`summarize` on LLM traces of 1, 3 and 10 GB, each beside the floor measured in the same run.

Builds (scripts/llm_trace_builder.py, under --out, reused when there) traces of the sizes asked
by repeating the decode steps of a real LLM trace recorded on an H200 (the committed
tests/fixtures/llm_h200/capture/eager_bs1.json.gz: a Llama-3.2-1B-shaped decoder, prefill and 8
decode steps), with fresh ids and shifted timestamps, in Kineto's order. Then, per size, in
fresh processes and interleaved --repeat times:

- the floor: one process decoding the file's events with msgspec into the loader's typed
  Structs (the file memory-mapped and its pages let go as they are read, cut into pieces of
  whole events; no columns, no analyses): what any reader of the trace pays at least;
- ``python profile.py summarize TRACE`` (every table, to a file): wall seconds, CPU seconds and
  the peak RSS of all its processes together (the loader forks a child for large files), its
  ratio to the floor's median, and how many progress lines it said on stderr;

then ``report TRACE`` once (the HTML page's size, and what it links to or embeds), and, where
asked, Holistic Trace Analysis' kernel breakdown (--hta-python, its own venv) and the PyTorch
TensorBoard plugin's loading (torch-tb-profiler: RunProfileData.parse and process), each
capped at --tool-timeout seconds and --tool-memory-gb of address space. --gzip also gzips the
first size and reads it: the inflaters (python-isal, zlib-ng, the standard library's zlib)
stream-inflating the same file, then `summarize` of the .json.gz (MB/s of JSON text).

    python scripts/bench_large_traces.py --sizes 1,3,10 --repeat 3 --gzip \
        --hta-python /tmp/hta-venv/bin/python --tb-plugin
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))
import llm_trace_builder  # noqa: E402

#: run a command; print (stderr, last line) wall, CPU of its children, peak RSS of the
#: largest process and of all its processes together (sampled every 10 ms; shared pages
#: counted in each), exit status. Optional memory cap (address space) for tools.
_MEASURE = """
import resource, subprocess, sys, time
from pathlib import Path
cap = int(sys.argv[1])
def limit():
    if cap:
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
def tree_kb(pid):
    try:
        kb = int(next(l for l in Path(f"/proc/{pid}/status").read_text().splitlines()
                      if l.startswith("VmRSS:")).split()[1])
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except (OSError, StopIteration):
        return 0
    return kb + sum(tree_kb(int(c)) for c in children)
start = time.perf_counter()
proc = subprocess.Popen(sys.argv[2:], preexec_fn=limit)
together = 0
while proc.poll() is None:
    together = max(together, tree_kb(proc.pid))
    time.sleep(0.01)
wall = time.perf_counter() - start
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
print(wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss, together, proc.returncode,
      file=sys.stderr)
"""

#: the floor: one process decoding the events with msgspec into the loader's typed Structs
_FLOOR = """
import gc, mmap, re, sys
gc.disable()
from profiler.trace.decode import complete_events  # (msgspec and the Structs; no pandas)
EVENT_END = re.compile(rb'\\}[ \\t\\n\\r]*,[ \\t\\n\\r]*(\\{)[ \\t\\n\\r]*"')
PIECE, PAGE = 2 << 20, mmap.PAGESIZE
with open(sys.argv[1], "rb") as f:
    data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
start = re.search(rb'"traceEvents"[ \\t\\n\\r]*:[ \\t\\n\\r]*\\[', data).end()
end = data.rfind(b"]", 0, data.rfind(b"}"))
view = memoryview(data)
pos = released = start
events = 0
while pos < end:
    cut = EVENT_END.search(data, pos + PIECE, end) if pos + PIECE < end else None
    stop = cut.start() + 1 if cut else end
    events += len(complete_events(b"".join((b"[", view[pos:stop], b"]"))))
    pos = cut.start(1) if cut else end
    if pos - released >= 16 << 20 or pos >= end:  # (pages let go as read, as the loader does)
        first = released // PAGE * PAGE
        data.madvise(mmap.MADV_DONTNEED, first, min(pos, end) - first)
        released = pos
print(events)
"""

_HTA = """
import sys
from hta.trace_analysis import TraceAnalysis
analyzer = TraceAnalysis(trace_dir=sys.argv[1])
kernel_type, kernels = analyzer.get_gpu_kernel_breakdown(visualize=False)
print(f"{len(kernels)} kernel rows")
"""

_TB_PLUGIN = """
import logging, sys, tempfile
logging.disable(logging.WARNING)
from torch_tb_profiler import __version__
from torch_tb_profiler.profiler.data import RunProfileData
profile = RunProfileData.parse("worker", 0, sys.argv[1], tempfile.mkdtemp())
profile.process()
print(f"torch-tb-profiler {__version__}: {len(profile.steps_names)} step(s)")
"""


class Measured:
    def __init__(self, line: str, stderr: str) -> None:
        wall, cpu, peak_kb, together_kb, rc = line.split()
        self.wall, self.cpu = float(wall), float(cpu)
        self.largest_gb, self.rc = int(peak_kb) / 1e6, int(rc)
        self.together_gb = max(int(together_kb), int(peak_kb)) / 1e6
        self.stderr = stderr


def measure(
    cmd: list[str], cap_gb: float = 0, timeout: float | None = None, stdout=None
) -> Measured | None:
    """One command under the wrapper; None when it ran past ``timeout`` (the wrapper and the
    command, in a session of their own, are then killed together)."""
    cap = int(cap_gb * 2**30)
    with subprocess.Popen(
        [sys.executable, "-c", _MEASURE, str(cap), *cmd],
        cwd=REPO,
        stdout=stdout if stdout is not None else subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ, COLUMNS="200"),
        start_new_session=True,
    ) as proc:
        try:
            _, stderr = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            return None
    lines = stderr.strip().splitlines()
    return Measured(lines[-1], "\n".join(lines[:-1]))


def median(values: list[float]) -> float:
    return statistics.median(values)


def fmt(values: list[float], digits: int = 1) -> str:
    return " / ".join(f"{v:.{digits}f}" for v in values)


def size_run(trace: Path, repeat: int, tables: Path) -> tuple[float, float]:
    """The floor and summarize, interleaved ``repeat`` times, after one read of the file (not
    measured: every measurement then finds it in the page cache as far as it fits); their
    medians (s)."""
    floors, walls, cpus, together, largest, progress = [], [], [], [], [], []
    with open(trace, "rb") as warm:
        while warm.read(1 << 24):
            pass
    for _ in range(repeat):
        floor = measure([sys.executable, "-c", _FLOOR, str(trace)])
        assert floor is not None and floor.rc == 0, floor and floor.stderr
        floors.append(floor.wall)
        with open(tables, "w") as out:
            run = measure(
                [sys.executable, str(REPO / "profile.py"), "summarize", str(trace)], stdout=out
            )
        assert run is not None
        if run.rc:
            sys.exit(f"summarize failed (exit {run.rc}): {run.stderr[-2000:]}")
        walls.append(run.wall)
        cpus.append(run.cpu)
        together.append(run.together_gb)
        largest.append(run.largest_gb)
        progress.append(len([x for x in run.stderr.splitlines() if x.startswith("reading ")]))
    size_gb = trace.stat().st_size / 1e9
    floor_s, wall_s = median(floors), median(walls)
    print(
        f"  floor (one-process msgspec decode of the events): {fmt(floors)} s, median "
        f"{floor_s:.1f} s ({floor_s / size_gb:.2f} s/GB)"
    )
    print(
        f"  summarize: {fmt(walls)} s wall, median {wall_s:.1f} s = {wall_s / floor_s:.2f}x "
        f"the floor; {fmt(cpus)} s CPU (all processes); peak RSS {fmt(together, 2)} GB all "
        f"processes together ({fmt(largest, 2)} GB the largest); "
        f"{progress[-1]} progress line(s) on stderr"
    )
    return floor_s, wall_s


def html_report(trace: Path, folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    page = folder / "report.html"
    run = measure(
        [sys.executable, str(REPO / "profile.py"), "report", str(trace), "--out", str(page)]
    )
    if run is None or run.rc or not page.exists():
        print(f"  report: failed ({run.stderr[-500:] if run else 'timed out'})")
        return
    text = page.read_text()
    links = re.findall(r"""(?:src|href)\s*=\s*["'](https?:|//)""", text)
    print(
        f"  report: {page.stat().st_size / 1e6:.3f} MB HTML in {run.wall:.1f} s, peak RSS "
        f"{run.together_gb:.2f} GB; {text.count('<tr')} table rows, "
        f"{text.count('data:image/')} embedded image(s), {len(links)} external link(s), "
        f"{text.count('<script')} script(s)"
    )


def tool(name: str, cmd: list[str], timeout: float, cap_gb: float, seconds: float) -> None:
    run = measure(cmd, cap_gb=cap_gb, timeout=timeout, stdout=subprocess.PIPE)
    if run is None:
        print(f"  {name}: no result within {timeout:.0f} s (stopped)")
    elif run.rc:
        why = "out of memory" if "MemoryError" in run.stderr else f"exit {run.rc}"
        print(
            f"  {name}: failed after {run.wall:.0f} s ({why}; address space capped at "
            f"{cap_gb:.0f} GiB), peak RSS {run.together_gb:.2f} GB"
        )
    else:
        print(
            f"  {name}: {run.wall:.1f} s wall ({run.wall / seconds:.1f}x summarize), peak RSS "
            f"{run.together_gb:.2f} GB"
        )


def gzip_run(trace: Path, repeat: int) -> None:
    """Inflaters on the same .json.gz, then summarize of it."""
    gz = trace.parent.with_name(trace.parent.name + "-gz") / (trace.name + ".gz")
    gz.parent.mkdir(exist_ok=True)
    if not gz.exists():
        start = time.perf_counter()
        partial = gz.with_name(gz.name + ".partial")  # renamed when whole
        if shutil.which("gzip"):
            with open(partial, "wb") as out:
                subprocess.run(["gzip", "-6", "-c", str(trace)], stdout=out, check=True)
        else:  # pragma: no cover
            import gzip

            with open(trace, "rb") as src, gzip.open(partial, "wb", compresslevel=6) as dst:
                shutil.copyfileobj(src, dst, 1 << 24)
        partial.replace(gz)
        print(f"gzipped {trace.name} (level 6) in {time.perf_counter() - start:.0f} s")
    text = trace.stat().st_size
    print(f"{gz.name}: {gz.stat().st_size / 1e6:.0f} MB gzip of {text / 1e9:.2f} GB of JSON")
    inflate = """
import sys, time, importlib
mod = importlib.import_module(sys.argv[2])
start, total = time.perf_counter(), 0
with open(sys.argv[1], "rb") as f:
    inflater = mod.decompressobj(31)
    while block := f.read(1 << 20):
        while block:
            total += len(inflater.decompress(block, 8 << 20))
            block = inflater.unconsumed_tail
print(time.perf_counter() - start, total)
"""
    for label, module in (
        ("python-isal (isal.isal_zlib)", "isal.isal_zlib"),
        ("zlib-ng (zlib_ng.zlib_ng)", "zlib_ng.zlib_ng"),
        ("standard library zlib", "zlib"),
    ):
        rates = []
        for _ in range(repeat):
            done = subprocess.run(
                [sys.executable, "-c", inflate, str(gz), module], capture_output=True, text=True
            )
            if done.returncode:
                rates = []
                break
            seconds, total = done.stdout.split()
            rates.append(int(total) / float(seconds) / 1e6)
        if rates:
            print(f"  inflate, {label}: {fmt(rates, 0)} MB/s of JSON, median {median(rates):.0f}")
        else:
            print(f"  inflate, {label}: not installed")
    walls, together = [], []
    for _ in range(repeat):
        run = measure([sys.executable, str(REPO / "profile.py"), "summarize", str(gz)])
        assert run is not None and run.rc == 0, run and run.stderr[-2000:]
        walls.append(run.wall)
        together.append(run.together_gb)
    rate = text / median(walls) / 1e6
    print(
        f"  summarize {gz.name}: {fmt(walls)} s wall, median {median(walls):.1f} s = "
        f"{rate:.0f} MB/s of JSON; peak RSS {fmt(together, 2)} GB all processes together"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1,3,10", help="GB, comma-separated")
    parser.add_argument("--out", type=Path, default=Path("/tmp/llm_bench"))
    parser.add_argument("--source", type=Path, default=llm_trace_builder.default_source())
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--gzip", action="store_true", help="Also gzip the first size, read it.")
    parser.add_argument("--report", action="store_true", help="Also `report` each size.")
    parser.add_argument("--hta-python", default=None, help="A venv's python with HTA.")
    parser.add_argument("--tb-plugin", action="store_true", help="Also torch-tb-profiler.")
    parser.add_argument("--tool-timeout", type=float, default=300.0)
    parser.add_argument("--tool-memory-gb", type=float, default=20.0)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    print(f"machine: {os.cpu_count()} CPUs, {memory:.1f} GiB, load average {load} at the start")
    print(f"source: {args.source}")
    tables = Path(tempfile.mkstemp(prefix="bench_large_", suffix=".txt")[1])
    for i, size in enumerate(float(x) for x in args.sizes.split(",")):
        folder = args.out / f"{size:g}gb"
        folder.mkdir(exist_ok=True)
        trace = folder / "rank0.pt.trace.json"
        if not trace.exists():
            start = time.perf_counter()
            counted = llm_trace_builder.build(args.source, trace, size)
            print(
                f"built {trace} in {time.perf_counter() - start:.0f} s: "
                + ", ".join(f"{v:,} {k}" for k, v in counted.items())
            )
        print(f"{trace}: {trace.stat().st_size / 1e9:.2f} GB")
        floor_s, wall_s = size_run(trace, args.repeat, tables)
        if args.report:
            html_report(trace, folder / "report")
        if args.hta_python:
            tool(
                "Holistic Trace Analysis (kernel breakdown)",
                [args.hta_python, "-c", _HTA, str(folder)],
                args.tool_timeout,
                args.tool_memory_gb,
                wall_s,
            )
        if args.tb_plugin:
            tool(
                "TensorBoard plugin (RunProfileData.parse + process)",
                [sys.executable, "-c", _TB_PLUGIN, str(trace)],
                args.tool_timeout,
                args.tool_memory_gb,
                wall_s,
            )
        if args.gzip and i == 0:
            gzip_run(trace, args.repeat)
    tables.unlink()


if __name__ == "__main__":
    main()
