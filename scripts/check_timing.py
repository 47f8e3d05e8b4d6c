#!/usr/bin/env python3
"""Cross-check the harness's latency figures against an independent loop in the same process.

Prepares one backend once, then alternates blocks of the harness's own timing code
(profiler.collect.timing.time_iterations, what `profile.py run` reports) with blocks of an
independent CUDA-event loop written here, so both see the same machine state (launch-bound runs
follow the host CPU, which drifts). Prints both medians and the host clock between synchronizes;
exits 1 if the event-loop median differs from the harness's by more than --tolerance (default 3 %).
Last, it runs torch.profiler once and times the independent loop again, to show whether the
profiler's instrumentation lingers after it stops (why the harness times before it profiles).

    python scripts/check_timing.py --backend pytorch_fp16 --bs 8 [--model resnet50]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def event_loop(fn, args, iters: int) -> list[float]:
    import torch

    times = []
    for _ in range(iters):
        start = torch.cuda.Event(enable_timing=True)
        stop = torch.cuda.Event(enable_timing=True)
        start.record()
        fn(*args)
        stop.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(stop))
    return times


def host_loop(fn, args, iters: int) -> list[float]:
    import torch

    times = []
    for _ in range(iters):
        torch.cuda.synchronize()
        began = time.perf_counter()
        fn(*args)
        torch.cuda.synchronize()
        times.append((time.perf_counter() - began) * 1000.0)
    return times


def profile_once(fn, args, steps: int = 5) -> None:
    import torch

    activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=activities):
        for _ in range(steps):
            fn(*args)
            torch.cuda.synchronize()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", default="pytorch_fp32")
    parser.add_argument("--bs", type=int, default=8)
    parser.add_argument("--model", default="resnet50")
    parser.add_argument("--iters", type=int, default=400, help="per method, over all blocks")
    parser.add_argument("--blocks", type=int, default=8)
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--compile-mode", default="default")
    parser.add_argument("--tolerance", type=float, default=3.0, help="percent")
    args = parser.parse_args()

    import torch

    if not torch.cuda.is_available():
        print("check_timing needs a CUDA GPU", file=sys.stderr)
        return 2
    from profiler.collect import backends, models
    from profiler.collect.device import set_math_flags
    from profiler.collect.timing import time_iterations
    from profiler.runs.config import RunConfig

    config = RunConfig(
        backend=args.backend, batch_size=args.bs, model=args.model, compile_mode=args.compile_mode
    )
    set_math_flags(config)
    model, inputs = models.build(config)
    prepared = backends.get(config.backend).prepare(model, inputs, config, torch.device("cuda"))
    fn, fn_args = prepared.fn, prepared.inputs
    for _ in range(args.warmup):
        fn(*fn_args)
    torch.cuda.synchronize()

    harness_ms, event_ms, host_ms = [], [], []
    block = max(1, args.iters // args.blocks)
    for _ in range(args.blocks):
        harness_ms += time_iterations(fn, fn_args, block, use_cuda=True)[0]
        event_ms += event_loop(fn, fn_args, block)
        host_ms += host_loop(fn, fn_args, block)
    profile_once(fn, fn_args)
    after_ms = event_loop(fn, fn_args, block * 2)

    harness_p50 = statistics.median(harness_ms)

    def line(label: str, values: list[float]) -> str:
        p50 = statistics.median(values)
        off = 100.0 * (p50 - harness_p50) / harness_p50
        return f"  {label:<34} p50 {p50:9.4f} ms  {off:+7.2f} %"

    print(
        f"{args.model} {args.backend} bs{args.bs} on {torch.cuda.get_device_name()}: "
        f"{args.blocks} alternating blocks of {block} iterations"
    )
    print(f"  {'harness timing (profile.py run)':<34} p50 {harness_p50:9.4f} ms")
    print(line("independent CUDA-event loop", event_ms))
    print(line("host clock between synchronizes", host_ms))
    print(line("event loop after torch.profiler", after_ms) + "  (not gated)")
    diff = 100.0 * (statistics.median(event_ms) - harness_p50) / harness_p50
    ok = abs(diff) <= args.tolerance
    print(f"  agreement within ±{args.tolerance:g} %: {'yes' if ok else 'NO'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
