"""Print the roofline inputs (FLOPs counted with FlopCounterMode, minimum bytes) of a model at
several batch sizes and precisions as JSON, as the harness stores them in result.json.

    python scripts/roofline_inputs.py --model resnet50 --bs 1,8,16,32 --precision fp32,fp16
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from profiler.collect import models  # noqa: E402
from profiler.collect.flops import roofline_inputs  # noqa: E402
from profiler.runs.config import RunConfig  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", default="resnet50")
    parser.add_argument("--bs", default="1,8,16,32")
    parser.add_argument("--precision", default="fp32,fp16")
    args = parser.parse_args()
    table = {}
    for bs in (int(b) for b in args.bs.split(",")):
        model, inputs = models.build(
            RunConfig(backend="pytorch_fp32", batch_size=bs, model=args.model)
        )
        for precision in args.precision.split(","):
            table[f"{precision}_bs{bs}"] = roofline_inputs(model, inputs, precision, bs)
    json.dump({"model": args.model, "roofline_inputs": table}, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
