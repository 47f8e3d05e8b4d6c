#!/usr/bin/env python3
"""Cross-check the harness's latency against an independent loop in the same process.

Runs `profile.py run` for one configuration (harness: CUDA events around each iteration, from
profiler.timing), then prepares the same backend afresh and times it two other ways written here
on their own: a CUDA-event loop, and the host clock between synchronizes. Prints the three
medians; exits 1 if the independent event loop's median differs from the harness's by more than
--tolerance (default 3 %).

    python scripts/check_timing.py --backend pytorch_fp16 --bs 8 [--model resnet50] [--iters 200]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def independent_medians(config, iters: int, warmup: int) -> tuple[float, float]:
    import torch

    from profiler import backends, models

    model, inputs = models.build(config)
    prepared = backends.get(config.backend).prepare(model, inputs, config, torch.device("cuda"))
    fn, args = prepared.fn, prepared.inputs
    for _ in range(warmup):
        fn(*args)
    torch.cuda.synchronize()

    event_ms = []
    for _ in range(iters):
        start = torch.cuda.Event(enable_timing=True)
        stop = torch.cuda.Event(enable_timing=True)
        start.record()
        fn(*args)
        stop.record()
        torch.cuda.synchronize()
        event_ms.append(start.elapsed_time(stop))

    host_ms = []
    for _ in range(iters):
        torch.cuda.synchronize()
        began = time.perf_counter()
        fn(*args)
        torch.cuda.synchronize()
        host_ms.append((time.perf_counter() - began) * 1000.0)
    return statistics.median(event_ms), statistics.median(host_ms)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", default="pytorch_fp32")
    parser.add_argument("--bs", type=int, default=8)
    parser.add_argument("--model", default="resnet50")
    parser.add_argument("--iters", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--compile-mode", default="default")
    parser.add_argument("--tolerance", type=float, default=3.0, help="percent")
    args = parser.parse_args()

    import torch

    if not torch.cuda.is_available():
        print("check_timing needs a CUDA GPU", file=sys.stderr)
        return 2
    from profiler import harness
    from profiler.config import RunConfig

    config = RunConfig(backend=args.backend, batch_size=args.bs, model=args.model,
                       iters=args.iters, timed_warmup=args.warmup,
                       compile_mode=args.compile_mode, name="check_timing")
    result = harness.run(config, quiet=True)
    harness_p50 = result["timing"]["p50_ms"]
    event_p50, host_p50 = independent_medians(config, args.iters, args.warmup)
    diff = 100.0 * (event_p50 - harness_p50) / harness_p50
    host_diff = 100.0 * (host_p50 - harness_p50) / harness_p50
    print(f"{args.model} {args.backend} bs{args.bs} on {torch.cuda.get_device_name()}, "
          f"{args.iters} iterations each")
    print(f"  harness (profile.py run)      p50 {harness_p50:9.4f} ms")
    print(f"  independent CUDA-event loop   p50 {event_p50:9.4f} ms   {diff:+6.2f} %")
    print(f"  host clock between syncs      p50 {host_p50:9.4f} ms   {host_diff:+6.2f} %")
    ok = abs(diff) <= args.tolerance
    print(f"  agreement within ±{args.tolerance:g} %: {'yes' if ok else 'NO'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
