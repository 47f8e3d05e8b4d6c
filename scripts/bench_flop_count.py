"""What the FLOP count of a run costs, in fresh processes: the count as this checkout makes it
(a copy of the model on the meta device under torch's FlopCounterMode, whose first dispatch
imports torch._dynamo), split into that import and the count itself; with ``--before REV``,
the count as the code at REV made it (its stand-in for torch._dynamo, for a comparison).

    python scripts/bench_flop_count.py [--model resnet50] [--bs 8] [--repeat 3] [--before REV]

Each line is one fresh process (nothing imported or cached from another): the seconds of
``import torch._dynamo`` alone and of ``flops.count`` (``count_s``: the count as a run's first
count makes it; ``after_dynamo_s``: the same count once torch._dynamo is imported); then the
medians. A run pays ``count_s`` only when its count is not in the FLOP cache (a built-in model
counted before, any backend, reads it back).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: one fresh process: build the model, then time what is asked (``mode``)
_CHILD = """
import json, sys, time
sys.path.insert(0, sys.argv[1])
mode, model_name, bs, before = sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
import torch
from profiler.collect import models
from profiler.runs.config import RunConfig
if before:
    import importlib.util
    spec = importlib.util.spec_from_file_location("flops_before", before)
    flops = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(flops)
else:
    from profiler.collect import flops
device = "cuda" if torch.cuda.is_available() else "cpu"
model, inputs = models.build(RunConfig(model=model_name, batch_size=bs), device)
began = time.perf_counter()
if mode == "after_dynamo":
    import torch._dynamo
    imported = time.perf_counter()
    counted = flops.count(model, inputs)
else:
    imported = began
    counted = flops.count(model, inputs)
done = time.perf_counter()
print(json.dumps({"dynamo_import_s": imported - began, "count_s": done - imported,
                  "flops": counted.get("flops_per_batch"), "how": counted.get("how"),
                  "error": counted.get("error"), "device": device}))
"""


def _once(mode: str, model: str, bs: int, before: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, str(ROOT), mode, model, str(bs), before],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="resnet50")
    parser.add_argument("--bs", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--before", default=None, help="a git revision to compare with")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        before = ""
        if args.before:
            text = subprocess.run(
                ["git", "show", f"{args.before}:profiler/collect/flops.py"],
                cwd=ROOT,
                capture_output=True,
                text=True,
                check=True,
            ).stdout
            before = str(Path(scratch) / "flops_before.py")
            Path(before).write_text(text)
        rows: dict[str, list[dict]] = {}
        plans = [("first count", "first", ""), ("after dynamo", "after_dynamo", "")]
        if before:
            plans.append((f"first count at {args.before}", "first", before))
        for _ in range(args.repeat):
            for label, mode, code in plans:
                row = _once(mode, args.model, args.bs, code)
                rows.setdefault(label, []).append(row)
                print(f"{label}: {json.dumps(row)}", flush=True)
    print(f"{args.model} bs {args.bs}, {args.repeat} fresh process(es) each; medians:")
    for label, found in rows.items():
        count = statistics.median(r["count_s"] for r in found)
        dynamo = statistics.median(r["dynamo_import_s"] for r in found)
        print(
            f"  {label}: count {count:.3f} s"
            + (f", import torch._dynamo {dynamo:.3f} s" if dynamo else "")
            + f" ({found[0]['how'] or found[0]['error']}; {found[0]['flops']} FLOPs)"
        )


if __name__ == "__main__":
    main()
