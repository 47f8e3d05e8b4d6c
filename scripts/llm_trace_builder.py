"""Build a large Kineto trace from a real LLM decode trace: its decode steps repeated.

The source (``eager_bs1.json.gz``: a Llama-3.2-1B-shaped decoder on an H200, prefill then 8
decode steps, each a ``decode`` record_function span) is split into the events of its decode
steps (the CPU events inside the decode spans, the GPU events and flows their launches
correlate with, the GPU copies of the spans) and the rest (prefill, metadata, the profiler's
span). The decode steps are then repeated: each copy shifted in time by the length of the 8
steps, with fresh correlation ids, External ids, flow ids and event indices, until the file
holds the size asked for. The file is written in Kineto's order (every CPU operator first,
then the GPU events, runtime calls and flows, then the metadata), and the profiler's span
(``PyTorch Profiler (0)``) covers the whole of it.

Used by scripts/bench_large_traces.py; importable, or run alone:

    python scripts/llm_trace_builder.py --size-gb 1 --out /tmp/llm_1gb.json
"""

from __future__ import annotations

import argparse
import gzip
import json
import time
from pathlib import Path
from typing import Any

try:  # (several times faster than json.dumps, where installed; the output is JSON either way)
    import orjson

    def dumps(event: dict[str, Any]) -> bytes:
        return orjson.dumps(event)

except ImportError:  # pragma: no cover

    def dumps(event: dict[str, Any]) -> bytes:
        return json.dumps(event).encode()


REPO = Path(__file__).resolve().parents[1]
SOURCES = (
    REPO / "tests/fixtures/llm_h200/capture/eager_bs1.json.gz",
    Path("/work/llm_traces/eager_bs1.json.gz"),
)
#: args that hold ids, shifted per copy so that every copy's ids are fresh
ID_ARGS = ("External id", "correlation", "Ev Idx")
CPU_CATS = ("cpu_op", "user_annotation", "python_function")
STEP_NAME = "decode"


def default_source() -> Path:
    return next((p for p in SOURCES if p.exists()), SOURCES[-1])


def read(path: Path) -> dict[str, Any]:
    raw = path.read_bytes()
    data: dict[str, Any] = json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
    return data


class Parts:
    """The source split: the events written once (before and after the steps, in the CPU and
    the GPU sections) and the decode steps' events (CPU section, GPU section)."""

    def __init__(self, data: dict[str, Any]) -> None:
        events = data["traceEvents"]
        self.header = {k: v for k, v in data.items() if k != "traceEvents"}
        steps = [
            e
            for e in events
            if e.get("ph") == "X" and e.get("cat") == "user_annotation" and e["name"] == STEP_NAME
        ]
        if not steps:
            raise SystemExit(f"no {STEP_NAME!r} spans in the source trace")
        self.start = min(e["ts"] for e in steps)
        self.end = max(e["ts"] + e["dur"] for e in steps)
        step_ext = {e["args"]["External id"] for e in steps}
        in_steps = [self.start <= e.get("ts", -1) <= self.end for e in events]
        # a launch call inside a step takes its GPU work and flow events with it
        launched = {
            e["args"]["correlation"]
            for e, inside in zip(events, in_steps)
            if inside
            and e.get("cat") in ("cuda_runtime", "cuda_driver")
            and isinstance(e.get("args"), dict)
            and "correlation" in e["args"]
        }
        self.cpu_once: list[dict[str, Any]] = []
        self.cpu_step: list[dict[str, Any]] = []
        self.gpu_once: list[dict[str, Any]] = []
        self.gpu_step: list[dict[str, Any]] = []
        self.tail: list[dict[str, Any]] = []
        self.trace_span: dict[str, Any] | None = None
        for e, inside in zip(events, in_steps):
            args = e.get("args") if isinstance(e.get("args"), dict) else {}
            if e.get("ph") == "X" and e.get("cat") == "Trace":
                self.trace_span = e
            elif e.get("ph") in ("M", "i") or "ts" not in e:
                self.tail.append(e)
            elif e.get("ph") == "X" and e.get("cat") in CPU_CATS:
                (self.cpu_step if inside else self.cpu_once).append(e)
            elif e.get("cat") == "gpu_user_annotation":
                (self.gpu_step if args.get("External id") in step_ext else self.gpu_once).append(e)
            elif e.get("ph") in ("s", "f"):
                (self.gpu_step if e.get("id") in launched else self.gpu_once).append(e)
            elif "correlation" in args and e.get("cat") not in ("cuda_runtime", "cuda_driver"):
                (self.gpu_step if args["correlation"] in launched else self.gpu_once).append(e)
            else:  # runtime calls, and events with no correlation, by their time
                (self.gpu_step if inside else self.gpu_once).append(e)
        self.steps = len(steps)
        self.period = (self.end - self.start) + 50.0  # 50 µs between copies
        ids = [
            v
            for e in events
            for v in [e.get("id")] + [(e.get("args") or {}).get(k) for k in ID_ARGS]
            if isinstance(v, int)
        ]
        self.id_shift = max(ids) + 1


def shifted(event: dict[str, Any], copy: int, parts: Parts) -> dict[str, Any]:
    e = dict(event)
    e["ts"] = e["ts"] + copy * parts.period
    if isinstance(e.get("id"), int):
        e["id"] = e["id"] + copy * parts.id_shift
    args = e.get("args")
    if isinstance(args, dict):
        args = dict(args)
        for key in ID_ARGS:
            if isinstance(args.get(key), int):
                args[key] += copy * parts.id_shift
        e["args"] = args
    return e


def build(source: Path, out: Path, size_gb: float) -> dict[str, Any]:
    """Write the trace (under a temporary name, renamed when whole: a stopped build leaves no
    trace a later run would take as built); what it holds (copies, steps, events, complete
    events, kernels)."""
    parts = Parts(read(source))
    block_cpu = [dumps(e) for e in parts.cpu_step]
    block_gpu = [dumps(e) for e in parts.gpu_step]
    block_bytes = sum(map(len, block_cpu)) + sum(map(len, block_gpu)) + 2 * len(parts.cpu_step)
    copies = max(1, round((size_gb * 1e9) / block_bytes))
    counted = {"copies": copies, "decode steps": copies * parts.steps}
    once = parts.cpu_once + parts.gpu_once + parts.tail
    block = parts.cpu_step + parts.gpu_step
    n_once, n_block = len(once) + 1, len(block)
    counted["events"] = n_once + copies * n_block
    counted["complete events"] = sum(e.get("ph") == "X" for e in once) + 1
    counted["complete events"] += copies * sum(e.get("ph") == "X" for e in block)
    counted["kernels"] = sum(e.get("cat") == "kernel" for e in once)
    counted["kernels"] += copies * sum(e.get("cat") == "kernel" for e in block)
    header = dumps(parts.header)[:-1] + b', "traceEvents": [\n'
    first = True
    partial = out.with_name(out.name + ".partial")
    with open(partial, "wb") as f:
        f.write(header)

        def write(lines: list[bytes]) -> None:
            nonlocal first
            if not lines:
                return
            f.write((b"" if first else b",\n") + b",\n".join(lines))
            first = False

        write([dumps(e) for e in parts.cpu_once])
        for copy in range(copies):
            write(
                block_cpu if copy == 0 else [dumps(shifted(e, copy, parts)) for e in parts.cpu_step]
            )
        write([dumps(e) for e in parts.gpu_once])
        for copy in range(copies):
            write(
                block_gpu if copy == 0 else [dumps(shifted(e, copy, parts)) for e in parts.gpu_step]
            )
        write([dumps(e) for e in parts.tail])
        if parts.trace_span is not None:
            span = dict(parts.trace_span)
            span["dur"] = (parts.end + (copies - 1) * parts.period) - span["ts"] + 1000.0
            write([dumps(span)])
        f.write(b"\n]}\n")
    partial.replace(out)
    counted["bytes"] = out.stat().st_size
    return counted


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, default=default_source())
    parser.add_argument("--size-gb", type=float, default=1.0)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    start = time.perf_counter()
    counted = build(args.source, args.out, args.size_gb)
    print(
        f"built {args.out} in {time.perf_counter() - start:.0f} s: "
        + ", ".join(f"{v:,} {k}" for k, v in counted.items())
    )


if __name__ == "__main__":
    main()
