"""Do the verdicts reproduce? The GPU benchmarks of the reproducibility rules (run on the GPU
machine from the repository root; each prints its figure beside its target).

    python scripts/bench_reproduce.py identical --backend pytorch_fp32 --bs 8 --pairs 10
        pairs of one config, each side sampled as `compare --processes 3` samples it (interleaved
        rounds, each a fresh process timing every side once): target at most 1 pair of 20 called
        faster or slower
    python scripts/bench_reproduce.py difference --a "pytorch_fp32 8 224" --b "pytorch_fp32 8 232"
        a real difference of about 5 %: its size from every process of every trial pooled, then
        each trial's 3-process verdict: target the right direction in at least 9 of 10
    python scripts/bench_reproduce.py sources --backend pytorch_fp32 --bs 8
        where the spread comes from: the CV of the window's median between back-to-back windows
        in one process, between windows of a rebuilt model in one process (cuDNN benchmark on
        and off), and between fresh processes
    python scripts/bench_reproduce.py matrix runs/sweep_a runs/sweep_b
        two sweeps of one matrix: every cell's verdict against the baseline identical in both,
        each cell's speedup inside the other sweep's interval (target: all)

All trials of a mode share rounds (one fresh process per round times every trial's sides, the
leader rotated), so a round costs one interpreter and torch start.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from profiler.analysis.verdict import compare  # noqa: E402
from profiler.runs.config import RunConfig  # noqa: E402
from profiler.sweep import rounds  # noqa: E402

MODEL = "resnet50"


def config(backend: str, bs: int, image_size: int = 224, iters: int = 100, **extra) -> dict:
    made = RunConfig(
        model=MODEL, backend=backend, batch_size=bs, image_size=image_size, iters=iters, **extra
    )
    return rounds.window_config(made, iters, made.timed_warmup or 20)


def sample(cells: dict[str, dict], processes: int) -> dict[str, list[list[float]]]:
    began = time.perf_counter()
    got = rounds.sample(cells, {}, processes, say=lambda line: print(line, flush=True))
    if got.errors:
        raise SystemExit(f"cells failed: {got.errors}")
    print(
        f"sampling: {got.rounds} rounds of {len(cells)} cells in "
        f"{time.perf_counter() - began:.0f} s",
        flush=True,
    )
    return got.windows


def identical(args) -> None:
    one = config(args.backend, args.bs)
    cells = {f"{side}{i}": one for i in range(args.pairs) for side in "AB"}
    windows = sample(cells, args.processes)
    called = 0
    for i in range(args.pairs):
        v = compare(windows[f"A{i}"], windows[f"B{i}"])
        called += v.verdict in ("faster", "slower")
        print(f"pair {i}: {v.verdict:9s} B/A {v.ratio:.4f} [{v.low:.4f}, {v.high:.4f}]")
    print(
        f"RESULT identical {args.backend} bs {args.bs}: {called} of {args.pairs} pairs called "
        f"faster/slower with {args.processes} processes a side (target: at most 1 of 20 over "
        f"both configs)"
    )


def parse_side(text: str) -> dict:
    backend, bs, image = text.split()
    return config(backend, int(bs), int(image))


def difference(args) -> None:
    a, b = parse_side(args.a), parse_side(args.b)
    cells = {f"{side}{i}": (a if side == "A" else b) for i in range(args.trials) for side in "AB"}
    windows = sample(cells, args.processes)
    all_a = [w for i in range(args.trials) for w in windows[f"A{i}"]]
    all_b = [w for i in range(args.trials) for w in windows[f"B{i}"]]
    truth = compare(all_a, all_b)
    print(
        f"truth from {len(all_a)} vs {len(all_b)} processes: B/A {truth.ratio:.4f} "
        f"[{truth.low:.4f}, {truth.high:.4f}] {truth.verdict}"
    )
    same = 0
    for i in range(args.trials):
        v = compare(windows[f"A{i}"], windows[f"B{i}"])
        same += v.verdict == truth.verdict
        print(f"trial {i}: {v.verdict:9s} B/A {v.ratio:.4f} [{v.low:.4f}, {v.high:.4f}]")
    head = f"RESULT difference {args.a} -> {args.b} ({100 * (truth.ratio - 1):+.1f} %): "
    tail = f"{args.processes} processes a side"
    if truth.verdict in ("faster", "slower"):
        print(
            f"{head}called {truth.verdict} in {same} of {args.trials} trials with {tail} "
            f"(target: at least 9 of 10)"
        )
    else:
        print(
            f"{head}no direction to find: the pooled verdict is {truth.verdict}; {same} of "
            f"{args.trials} trials with {tail} were {truth.verdict} too"
        )


def cv(values: list[float]) -> float:
    return statistics.stdev(values) / statistics.mean(values)


def sources(args) -> None:
    """The in-process parts run in a child (this process never imports torch)."""
    code = f"""
import statistics, torch, gc
from profiler.collect import repeat_window, backends, models, timing, window
from profiler.collect.device import set_math_flags
from profiler.collect.workloads.protocol import RunContext
from profiler.collect.workloads.forward import Forward
from profiler.runs.config import RunConfig
def medians_back_to_back(config, k):
    cuda = torch.cuda.is_available(); device = torch.device("cuda" if cuda else "cpu")
    set_math_flags(config)
    model, inputs = models.build(config, device)
    progress = window.Progress(quiet=True)
    wl = Forward(RunContext(config, backends.get(config.backend), model, inputs, device, cuda,
                            progress.say, progress.warn))
    step, _, _ = window.prepare(wl, cuda, progress)
    plan = timing.plan_window(config.iters, 20, None, cuda)
    window.warm_up(plan, step, cuda, progress)
    out = []
    for _ in range(k):
        lat, _ = timing.time_iterations(step.fn, step.inputs, config.iters, cuda)
        if not cuda: lat = list(lat)
        if cuda: torch.cuda.synchronize()
        out.append(statistics.median(lat))
    return out
def medians_rebuilt(config, k):
    out = []
    for _ in range(k):
        out.append(statistics.median(repeat_window.time_once(config)["latencies_ms"]))
        gc.collect(); torch.cuda.empty_cache()
    return out
base = RunConfig(model={MODEL!r}, backend={args.backend!r}, batch_size={args.bs}, iters=100,
                 timed_warmup=20)
import dataclasses
for label, fn, cfg in (("back-to-back windows, one process", medians_back_to_back, base),
                       ("rebuilt model, one process, cudnn.benchmark off", medians_rebuilt, base),
                       ("rebuilt model, one process, cudnn.benchmark on", medians_rebuilt,
                        dataclasses.replace(base, cudnn_benchmark=True))):
    m = fn(cfg, {args.k})
    print("SOURCE", label, "|", " ".join(f"{{v:.4f}}" for v in m), "| CV",
          f"{{100 * statistics.stdev(m) / statistics.mean(m):.2f}} %", flush=True)
"""
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, text=True)
    if done.returncode:
        raise SystemExit(done.returncode)
    for benchmark_on in (False, True):
        cells = {"p": config(args.backend, args.bs, cudnn_benchmark=benchmark_on)}
        medians = [statistics.median(w) for w in sample(cells, args.k)["p"]]
        print(
            "SOURCE fresh processes, cudnn.benchmark",
            "on" if benchmark_on else "off",
            "|",
            " ".join(f"{v:.4f}" for v in medians),
            f"| CV {100 * cv(medians):.2f} %",
            flush=True,
        )


def matrix(args) -> None:
    import pandas as pd

    from profiler.analysis.sweep_analysis import SweepAnalysis

    tables = [SweepAnalysis(Path(p)).benchmark.set_index(["backend", "bs"]) for p in args.sweeps]
    one, two = tables
    same_verdict = inside = cells = 0
    for key in one.index:
        a, b = one.loc[key], two.loc[key]
        if a["verdict"] in ("baseline", "") or pd.isna(a["speedup"]) or pd.isna(b["speedup"]):
            continue
        cells += 1
        agree = a["verdict"] == b["verdict"]
        within = (
            b["speedup_low"] <= a["speedup"] <= b["speedup_high"]
            and a["speedup_low"] <= b["speedup"] <= a["speedup_high"]
        )
        same_verdict += agree
        inside += within
        print(
            f"{key[0]:>14s} bs {key[1]:>2}: {a['verdict']:9s} {a['speedup']:.3f}x "
            f"[{a['speedup_low']:.3f}, {a['speedup_high']:.3f}] | {b['verdict']:9s} "
            f"{b['speedup']:.3f}x [{b['speedup_low']:.3f}, {b['speedup_high']:.3f}]"
            f"{'' if agree else '  VERDICT DIFFERS'}{'' if within else '  OUTSIDE'}"
        )
    print(
        f"RESULT matrix: verdict identical in {same_verdict} of {cells} cells, each speedup "
        f"inside the other sweep's interval in {inside} of {cells} (target: all)"
    )


def main() -> None:
    global MODEL
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet50", help="the model of every config")
    sub = parser.add_subparsers(dest="mode", required=True)
    p = sub.add_parser("identical")
    p.add_argument("--backend", default="pytorch_fp32")
    p.add_argument("--bs", type=int, default=8)
    p.add_argument("--pairs", type=int, default=10)
    p.add_argument("--processes", type=int, default=3)
    p = sub.add_parser("difference")
    p.add_argument("--a", default="pytorch_fp32 8 224")
    p.add_argument("--b", default="pytorch_fp32 8 232")
    p.add_argument("--trials", type=int, default=10)
    p.add_argument("--processes", type=int, default=3)
    p = sub.add_parser("sources")
    p.add_argument("--backend", default="pytorch_fp32")
    p.add_argument("--bs", type=int, default=8)
    p.add_argument("--k", type=int, default=8)
    p = sub.add_parser("matrix")
    p.add_argument("sweeps", nargs=2)
    args = parser.parse_args()
    MODEL = args.model
    {"identical": identical, "difference": difference, "sources": sources, "matrix": matrix}[
        args.mode
    ](args)


if __name__ == "__main__":
    main()
