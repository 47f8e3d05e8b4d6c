"""The measurements behind the verdicts' statistics, on a GPU machine: raw per-iteration samples
of several configs in many fresh processes (each process one round timing every config in turn,
as a sweep's rounds do), then what they say.

    python scripts/bench_verdicts.py collect --processes 15 --out raw.json
    python scripts/bench_verdicts.py analyse raw.json          # works on any machine
    python scripts/bench_verdicts.py jitter --processes 8 --out jitter.json

collect: every process times the cells of CELLS (ResNet50: eager FP32 bs 8 three times, FP16
bs 1 three times, FP16 bs 2, FP32 bs 16 at 224 and at 220 pixels), the order rotated between
processes, each cell with the tool's own timing child (profiler.collect.repeat_window: warm-up,
the latency window, the GPU-time window). analyse prints, from the raw file:
- each figure's between-process CV per config, and the launch-bound margin (enqueue p90 / GPU
  time p50 per process);
- the within-process correlation of two configs' medians per figure (what pairing pays);
- enqueue in the timed window against enqueue behind the sleep, and latency;
- the verdicts of the tool (profiler.analysis.timed_verdict) on identical pairs, on the ~3 %
  pixel difference and on a launch-bound pair, over disjoint groups of 5 processes (5 rounds),
  and over overlapping random groups;
- a sweep of cells identical to their baseline, with the false-discovery control.
jitter: one launch-bound config (eager FP16 bs 1) timed in fresh processes under each host lever
(as today, pinned to two cores near the GPU, garbage collector off, one intra-op thread), its
latency spread between processes per lever.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from profiler import child_env  # noqa: E402
from profiler.analysis.timed_verdict import control_family, judge  # noqa: E402
from profiler.report.sentences import note_lines  # noqa: E402
from profiler.runs.samples import ConfigSamples, ProcessWindow  # noqa: E402

CELLS = {
    "fp32_bs8_a": {"backend": "pytorch_fp32", "batch_size": 8},
    "fp32_bs8_b": {"backend": "pytorch_fp32", "batch_size": 8},
    "fp32_bs8_c": {"backend": "pytorch_fp32", "batch_size": 8},
    "fp16_bs1_a": {"backend": "pytorch_fp16", "batch_size": 1},
    "fp16_bs1_b": {"backend": "pytorch_fp16", "batch_size": 1},
    "fp16_bs1_c": {"backend": "pytorch_fp16", "batch_size": 1},
    "fp16_bs2": {"backend": "pytorch_fp16", "batch_size": 2},
    "fp32_bs16_224": {"backend": "pytorch_fp32", "batch_size": 16, "image_size": 224},
    "fp32_bs16_220": {"backend": "pytorch_fp32", "batch_size": 16, "image_size": 220},
}
#: --set real: GPU-bound configs a few per cent apart, to find a real ~3 % difference
REAL_CELLS = {
    "fp32_bs16_224": {"backend": "pytorch_fp32", "batch_size": 16, "image_size": 224},
    "fp32_bs16_216": {"backend": "pytorch_fp32", "batch_size": 16, "image_size": 216},
    "fp32_bs16_208": {"backend": "pytorch_fp32", "batch_size": 16, "image_size": 208},
    "fp32_bs15_224": {"backend": "pytorch_fp32", "batch_size": 15, "image_size": 224},
}
SETS = {"pairs": CELLS, "real": REAL_CELLS}
IDENTICAL = [
    ("fp32_bs8_a", "fp32_bs8_b"),
    ("fp32_bs8_a", "fp32_bs8_c"),
    ("fp32_bs8_b", "fp32_bs8_c"),
    ("fp16_bs1_a", "fp16_bs1_b"),
    ("fp16_bs1_a", "fp16_bs1_c"),
    ("fp16_bs1_b", "fp16_bs1_c"),
]
REAL = ("fp32_bs16_224", "fp32_bs16_220")
LAUNCH = ("fp16_bs1_a", "fp16_bs2")
GROUP = 5


def config_json(cell: dict, iters: int = 100, warmup: int = 20) -> dict:
    from profiler.runs.config import RunConfig, config_to_json

    return config_to_json(RunConfig(model="resnet50", iters=iters, timed_warmup=warmup, **cell))


def one_process(cells: list[tuple[str, dict]], levers: str = "") -> dict:
    env = child_env()
    if levers:
        env["INFER_PROFILER_LEVERS"] = levers
    began = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "profiler.collect.repeat_window"],
        input=json.dumps({"cells": [{"key": k, "config": c} for k, c in cells]}),
        capture_output=True,
        text=True,
        env=env,
    )
    records = {}
    for line in done.stdout.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and "key" in record:
            records[record.pop("key")] = record
    if done.returncode:
        print(done.stderr[-2000:], file=sys.stderr)
    return {
        "records": records,
        "wall_s": time.perf_counter() - began,
        "order": [k for k, _ in cells],
        "levers": levers,
    }


def collect(args) -> None:
    cells = SETS[args.set]
    configs = {k: config_json(c) for k, c in cells.items()}
    keys = list(configs)
    out = {"cells": cells, "processes": []}
    for index in range(args.processes):
        shift = index % len(keys)
        order = keys[shift:] + keys[:shift]
        if index % 2:
            order.reverse()
        got = one_process([(k, configs[k]) for k in order])
        out["processes"].append(got)
        lat = {
            k: np.median(r["latencies_ms"])
            for k, r in got["records"].items()
            if "latencies_ms" in r
        }
        print(
            f"process {index + 1}/{args.processes}: {got['wall_s']:.1f} s; "
            + " ".join(f"{k}={v:.3f}" for k, v in lat.items()),
            flush=True,
        )
        Path(args.out).write_text(json.dumps(out))


def samples_of(raw: dict, key: str, indices) -> ConfigSamples:
    windows = []
    for i in indices:
        r = raw["processes"][i]["records"].get(key)
        if r and "latencies_ms" in r:
            windows.append(
                ProcessWindow(
                    tuple(r["latencies_ms"]),
                    tuple(r.get("gpu_ms") or ()),
                    tuple(r.get("enqueue_ms") or ()),
                    "0",
                    f"r{i}",
                )
            )
    return ConfigSamples(tuple(windows))


def cv(values) -> float:
    x = np.asarray(values, dtype=float)
    return float(x.std(ddof=1) / x.mean())


def analyse(args) -> None:
    raw = json.loads(Path(args.raw).read_text())
    n = len(raw["processes"])
    everyone = range(n)
    print(
        f"{n} processes, {len(raw['cells'])} cells each; process wall "
        f"{np.median([p['wall_s'] for p in raw['processes']]):.1f} s median"
    )
    print("\n## per config: medians over processes (ms), between-process CV, launch margin")
    print(
        f"{'cell':15} {'latency p50':>22} {'CV':>6} {'GPU time p50':>22} {'CV':>6} "
        f"{'enqueue':>8} {'held enq':>8} {'enq90/gpu':>16} bound"
    )
    for key in raw["cells"]:
        s = samples_of(raw, key, everyone)
        lat, gpu = s.medians("latency"), s.medians("gpu_time")
        enq = s.medians("enqueue")
        held = [
            raw["processes"][i]["records"][key].get("held_enqueue_p50_ms")
            for i in everyone
            if key in raw["processes"][i]["records"]
        ]
        ratios = [
            float(np.percentile(w.enqueue_ms, 90)) / w.median("gpu_time")
            for w in s.windows
            if w.gpu_ms and w.enqueue_ms
        ]
        launch, seen = s.launch_bound_processes()
        print(
            f"{key:15} {min(lat):9.3f}-{max(lat):<9.3f}  {100 * cv(lat):5.1f}% "
            f"{min(gpu):9.3f}-{max(gpu):<9.3f}  {100 * cv(gpu):5.2f}% "
            f"{np.median(enq):8.3f} {np.median([h for h in held if h]):8.3f} "
            f"{min(ratios):6.2f}-{max(ratios):<6.2f}   {s.bound()} ({launch}/{seen})"
        )
    if set(raw["cells"]) == set(REAL_CELLS):
        return analyse_real(raw, args)
    print("\n## enqueue: timed window (idle stream) vs behind the sleep (held), vs latency")
    for key in raw["cells"]:
        rows = [
            raw["processes"][i]["records"][key]
            for i in everyone
            if key in raw["processes"][i]["records"]
        ]
        enq = np.median([np.median(r["enqueue_ms"]) for r in rows])
        held = np.median([r["held_enqueue_p50_ms"] for r in rows])
        lat = np.median([np.median(r["latencies_ms"]) for r in rows])
        redone = sum(r.get("gpu_redone", 0) for r in rows)
        print(
            f"{key:15} enqueue {enq:7.3f}  held {held:7.3f} ({100 * (held / enq - 1):+5.1f} %)"
            f"  latency {lat:7.3f}  held/latency {100 * (held / lat - 1):+5.1f} %; "
            f"GPU-time iterations redone: {redone} of {100 * len(rows)}"
        )
    print("\n## within-process correlation of log medians (pairs of configs in one process)")
    pairs = [
        ("fp32_bs8_a", "fp16_bs1_a"),
        ("fp32_bs8_a", "fp32_bs16_224"),
        ("fp16_bs1_a", "fp16_bs2"),
        ("fp32_bs16_224", "fp32_bs16_220"),
        *IDENTICAL[:1],
        IDENTICAL[3],
    ]
    for figure in ("latency", "gpu_time"):
        for a, b in pairs:
            sa, sb = samples_of(raw, a, everyone), samples_of(raw, b, everyone)
            x, y = np.log(sa.medians(figure)), np.log(sb.medians(figure))
            rho = float(np.corrcoef(x, y)[0, 1])
            paired = float(np.std(y - x, ddof=1))
            unpaired = math.sqrt(np.var(x, ddof=1) + np.var(y, ddof=1))
            print(
                f"{figure:8} {a:14} vs {b:14} rho {rho:+.2f}  sd(log ratio) paired "
                f"{100 * paired:5.2f} % unpaired {100 * unpaired:5.2f} %"
            )
    groups = [range(g * GROUP, (g + 1) * GROUP) for g in range(n // GROUP)]
    rng = random.Random(0)
    overlapping = [sorted(rng.sample(range(n), GROUP)) for _ in range(args.subsets)]

    def verdicts(a: str, b: str, indices) -> str:
        v = judge(samples_of(raw, a, indices), samples_of(raw, b, indices))
        return (
            f"latency {v.latency.verdict:9} {v.latency.speedup:.3f}x "
            f"[{1 / v.latency.high:.3f}-{1 / v.latency.low:.3f}] {v.latency.design:8} | "
            f"GPU {v.gpu_time.verdict:9} {v.gpu_time.speedup:.3f}x "
            f"[{1 / v.gpu_time.high:.3f}-{1 / v.gpu_time.low:.3f}] {v.gpu_time.design}"
        ), v

    def tally(title: str, cases: list[tuple[str, str]], indices_list) -> None:
        print(f"\n## {title}")
        counts = {"latency": {}, "gpu_time": {}}
        widths = {"latency": [], "gpu_time": []}
        for a, b in cases:
            for indices in indices_list:
                line, v = verdicts(a, b, indices)
                if indices_list is groups:
                    print(f"{a} vs {b}, processes {indices[0]}-{indices[-1]}: {line}")
                for figure, fv in (("latency", v.latency), ("gpu_time", v.gpu_time)):
                    counts[figure][fv.verdict] = counts[figure].get(fv.verdict, 0) + 1
                    widths[figure].append(100 * (math.exp(fv.half_width) - 1))
        for figure in counts:
            print(
                f"  {figure}: {dict(sorted(counts[figure].items()))}; median half-width "
                f"±{np.median(widths[figure]):.2f} %"
            )

    tally(f"identical pairs, disjoint groups of {GROUP} rounds", IDENTICAL, groups)
    tally(
        f"identical pairs, {args.subsets} overlapping random groups of {GROUP}",
        IDENTICAL,
        overlapping,
    )
    tally("a real difference: 224 vs 220 pixels (FP32 bs 16), disjoint groups", [REAL], groups)
    tally(f"the same, {args.subsets} overlapping random groups", [REAL], overlapping)
    print("\n## a launch-bound pair (eager FP16 bs 1 vs bs 2), all processes")
    line, v = verdicts(*LAUNCH, everyone)
    print(line)
    for text in note_lines(v):
        print("  " + text)
    line, v = verdicts(*LAUNCH, groups[0])
    print(f"first {GROUP} processes: {line}")
    for text in note_lines(v):
        print("  " + text)
    print("\n## sweeps of cells identical to their baseline (false-discovery control)")
    family = [
        ("fp32_bs8_a", "fp32_bs8_b"),
        ("fp32_bs8_a", "fp32_bs8_c"),
        ("fp16_bs1_a", "fp16_bs1_b"),
        ("fp16_bs1_a", "fp16_bs1_c"),
    ]
    false_any = {"latency": 0, "gpu_time": 0}
    decided_same = {"latency": 0, "gpu_time": 0}
    sweeps = [*groups, *overlapping]
    for indices in sweeps:
        found = control_family(
            [judge(samples_of(raw, a, indices), samples_of(raw, b, indices)) for a, b in family]
        )
        for figure in false_any:
            words = [getattr(v, figure).verdict for v in found]
            false_any[figure] += any(w in ("faster", "slower") for w in words)
            decided_same[figure] += words.count("same")
    for figure in false_any:
        print(
            f"  {figure}: {false_any[figure]} of {len(sweeps)} sweeps of {len(family)} "
            f"identical cells had a faster/slower; 'same' in {decided_same[figure]} of "
            f"{len(sweeps) * len(family)} cells"
        )


def analyse_real(raw: dict, args) -> None:
    """Every cell against the 224-pixel bs 16 one: the difference over all processes (the
    truth, as far as these processes know it), and how often groups of 5 rounds find it."""
    n = len(raw["processes"])
    base = "fp32_bs16_224"
    groups = [range(g * GROUP, (g + 1) * GROUP) for g in range(n // GROUP)]
    rng = random.Random(0)
    overlapping = [sorted(rng.sample(range(n), GROUP)) for _ in range(args.subsets)]
    print(f"\n## real differences against {base}: all {n} processes, then groups of {GROUP}")
    for key in raw["cells"]:
        if key == base:
            continue
        whole = judge(samples_of(raw, base, range(n)), samples_of(raw, key, range(n)))
        print(
            f"{key}: all processes: GPU time {whole.gpu_time.speedup:.4f}x "
            f"[{1 / whole.gpu_time.high:.4f}-{1 / whole.gpu_time.low:.4f}], latency "
            f"{whole.latency.speedup:.4f}x"
        )
        for label, sets in (("disjoint", groups), ("overlapping", overlapping)):
            counts = {"latency": {}, "gpu_time": {}}
            for indices in sets:
                v = judge(samples_of(raw, base, indices), samples_of(raw, key, indices))
                for figure in counts:
                    word = getattr(v, figure).verdict
                    counts[figure][word] = counts[figure].get(word, 0) + 1
                if sets is groups:
                    print(
                        f"  processes {indices[0]}-{indices[-1]}: GPU {v.gpu_time.verdict} "
                        f"{v.gpu_time.speedup:.4f}x [{1 / v.gpu_time.high:.4f}-"
                        f"{1 / v.gpu_time.low:.4f}] {v.gpu_time.design}; latency "
                        f"{v.latency.verdict} {v.latency.speedup:.4f}x"
                    )
            print(f"  {label} groups: latency {counts['latency']}, GPU time {counts['gpu_time']}")


def jitter(args) -> None:
    config = config_json({"backend": "pytorch_fp16", "batch_size": 1})
    near = near_cores(2)
    modes = {
        "as today": "",
        f"pinned to {near}": f"pin={near}",
        "gc off": "gc-off",
        "1 intra-op thread": "threads=1",
    }
    out = {"modes": modes, "processes": {m: [] for m in modes}}
    for index in range(args.processes):
        for mode, levers in modes.items():  # interleaved: drift lands on every mode alike
            got = one_process([("fp16_bs1", config)], levers)
            out["processes"][mode].append(got)
        Path(args.out).write_text(json.dumps(out))
        print(f"round {index + 1}/{args.processes}", flush=True)
    report_jitter(out)


def near_cores(count: int) -> str:
    """``count`` CPUs of GPU 0's NUMA node (sysfs), else of the allowed ones."""
    try:
        import torch

        bus = torch.cuda.get_device_properties(0)
        bus_id = f"{bus.pci_domain_id:04x}:{bus.pci_bus_id:02x}:{bus.pci_device_id:02x}.0"
        text = Path(f"/sys/bus/pci/devices/{bus_id}/local_cpulist").read_text().strip()
        cpus = []
        for part in text.split(","):
            low, _, high = part.partition("-")
            cpus.extend(range(int(low), int(high or low) + 1))
        allowed = os.sched_getaffinity(0)
        cpus = [c for c in cpus if c in allowed] or sorted(allowed)
    except Exception:  # no torch, no sysfs entry: the first allowed cores
        cpus = sorted(os.sched_getaffinity(0))
    # CPU 0 and 1 take most of the host's interrupts and housekeeping: the next ones when the
    # node has them (the first run pinned to 0-1 and was slower than unpinned)
    chosen = cpus[2 : 2 + count] if len(cpus) >= 2 + count else cpus[:count]
    return (
        f"{chosen[0]}-{chosen[-1]}"
        if chosen == list(range(chosen[0], chosen[-1] + 1))
        else ";".join(map(str, chosen))
    )


def report_jitter(out: dict) -> None:
    print("\n## host levers: eager FP16 bs 1, latency p50 per fresh process")
    for mode, processes in out["processes"].items():
        lat = [
            float(np.median(p["records"]["fp16_bs1"]["latencies_ms"]))
            for p in processes
            if "latencies_ms" in p["records"].get("fp16_bs1", {})
        ]
        gpu = [
            float(np.median(p["records"]["fp16_bs1"]["gpu_ms"]))
            for p in processes
            if p["records"].get("fp16_bs1", {}).get("gpu_ms")
        ]
        within = [
            cv(p["records"]["fp16_bs1"]["latencies_ms"])
            for p in processes
            if "latencies_ms" in p["records"].get("fp16_bs1", {})
        ]
        print(
            f"{mode:22} latency {min(lat):6.3f}-{max(lat):<6.3f} ms range "
            f"{100 * (max(lat) - min(lat)) / np.median(lat):5.1f} % CV {100 * cv(lat):5.1f} %"
            f" (within a window {100 * np.median(within):4.1f} %); GPU time "
            f"{min(gpu):6.3f}-{max(gpu):<6.3f} CV {100 * cv(gpu):4.2f} %"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="what", required=True)
    c = sub.add_parser("collect")
    c.add_argument("--processes", type=int, default=15)
    c.add_argument("--out", required=True)
    c.add_argument("--set", choices=sorted(SETS), default="pairs")
    a = sub.add_parser("analyse")
    a.add_argument("raw")
    a.add_argument("--subsets", type=int, default=40)
    j = sub.add_parser("jitter")
    j.add_argument("--processes", type=int, default=8)
    j.add_argument("--out", required=True)
    r = sub.add_parser("jitter-report")
    r.add_argument("raw")
    args = parser.parse_args()
    if args.what == "collect":
        collect(args)
    elif args.what == "analyse":
        analyse(args)
    elif args.what == "jitter":
        jitter(args)
    else:
        report_jitter(json.loads(Path(args.raw).read_text()))


if __name__ == "__main__":
    main()
