#!/usr/bin/env python3
"""Inductor on the encoder-decoder generation loop: torch.compile(dynamic=True) over exact target
lengths (what the inductor_* backends do) against static shapes padded to buckets of 16 (one
graph per bucket, what the split TensorRT engines do). Prints compile time (the first
generation), the mean generation time after it, and how many graphs Dynamo made.

    python scripts/bench_generate_inductor.py [--new-tokens 40] [--d-model 64] [--device cpu]
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from profiler.collect.models import Seq2SeqTransformer
from profiler.collect.workloads import loops


def parts_for(model, how: str, max_len: int):
    if how == "eager":
        return loops.Seq2SeqParts(model.encode, model.decode, model.project)
    if how == "dynamic":

        def compiled(method):
            return torch.compile(getattr(model, method), dynamic=True)

        return loops.Seq2SeqParts(compiled("encode"), compiled("decode"), compiled("project"))
    decode = torch.compile(model.decode, dynamic=False)  # one graph per padded length
    return loops.Seq2SeqParts(
        torch.compile(model.encode, dynamic=False),
        loops.padded_decoder({n: decode for n in range(1, max_len + 1)}, max_len),
        torch.compile(model.project, dynamic=False),
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--new-tokens", type=int, default=40)
    parser.add_argument("--d-model", type=int, default=64)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--bs", type=int, default=2)
    parser.add_argument("--src-len", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    torch.manual_seed(0)
    model = (
        Seq2SeqTransformer(
            vocab=1000, d_model=args.d_model, heads=4, layers=args.layers, max_len=256
        )
        .eval()
        .to(args.device)
    )
    src = torch.randint(1, 1000, (args.bs, args.src_len), device=args.device)
    reference = None
    for how in ("eager", "dynamic", "padded"):
        torch._dynamo.reset()
        torch._dynamo.utils.counters.clear()
        parts = parts_for(model, how, 256)
        began = time.perf_counter()
        out = loops.greedy_seq2seq(parts, src, args.new_tokens)
        if args.device != "cpu":
            torch.cuda.synchronize()
        first = time.perf_counter() - began
        times = []
        for _ in range(args.repeats):
            began = time.perf_counter()
            loops.greedy_seq2seq(parts, src, args.new_tokens)
            if args.device != "cpu":
                torch.cuda.synchronize()
            times.append(time.perf_counter() - began)
        reference = out.tokens if reference is None else reference
        graphs = torch._dynamo.utils.counters["stats"].get("unique_graphs", 0)
        print(
            f"{how:8s} first generation {first:7.2f} s  then mean "
            f"{1000 * statistics.mean(times):8.2f} ms per generation of {args.new_tokens} "
            f"tokens  graphs {graphs}  tokens equal to eager "
            f"{torch.equal(out.tokens, reference)}",
            flush=True,
        )


if __name__ == "__main__":
    main()
