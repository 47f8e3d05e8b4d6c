"""Facts for LLM decode under CUDA graphs, read on the GPU machine before the tool relies on them.

A Llama-3.2-1B-shaped decoder from transformers (random weights, FP16, static KV cache): one
prefill and decode steps, profiled three ways, each trace written gzipped to $OUT:

- eager: prefill + N decode steps under record_function("prefill"/"decode");
- graph: the decode step captured into a torch.cuda.CUDAGraph WITH the profiler running over the
  capture (what the capture records: launch calls, their operators), then replays profiled;
- reduce-overhead: torch.compile(mode="reduce-overhead") decode steps, the first calls (compile,
  cudagraph trees' warm-up, recording) profiled, then later replays profiled.

For each it prints: events by category, the launch calls seen at capture against the kernels per
replay, whether kernel args carry a graph or node id, and the kernel names of a replay against
those of the eager step (in order). Timings: decode step p50 eager / replay / reduce-overhead.

    OUT=/tmp/out python3 scripts/device_llm_graph_facts.py [--layers 16] [--bs 1]
"""

from __future__ import annotations

import argparse
import collections
import gzip
import json
import os
import shutil
import statistics
import sys
import time
import traceback

import torch

OUT = os.environ.get("OUT", ".")
LAUNCH = (
    "cudaLaunchKernel",
    "cudaLaunchKernelExC",
    "cuLaunchKernel",
    "cuLaunchKernelEx",
    "cudaMemsetAsync",
    "cudaMemcpyAsync",
)


def log(*a):
    print(*a, flush=True)


def save(prof, name):
    path = os.path.join(OUT, name + ".json")
    prof.export_chrome_trace(path)
    with open(path, "rb") as a, gzip.open(path + ".gz", "wb", compresslevel=6) as b:
        shutil.copyfileobj(a, b)
    with open(path) as handle:
        ev = json.load(handle)["traceEvents"]
    os.remove(path)
    log(f"[{name}] {len(ev)} events, gz {os.path.getsize(path + '.gz') / 1e6:.2f} MB")
    return ev


def describe(name, ev):
    cats = collections.Counter(e.get("cat") for e in ev)
    log(f"[{name}] categories {dict(cats)}")
    k = [e for e in ev if e.get("cat") == "kernel"]
    keys = collections.Counter(key for e in k for key in e.get("args", {}))
    log(f"[{name}] kernel arg keys {dict(keys)}")
    rt = [e for e in ev if e.get("cat") in ("cuda_runtime", "cuda_driver")]
    names = collections.Counter(e["name"] for e in rt).most_common(12)
    log(f"[{name}] runtime/driver names {names}")
    corr = collections.Counter(e.get("args", {}).get("correlation") for e in k)
    log(f"[{name}] kernels {len(k)}, distinct correlations {len(corr)}, top {corr.most_common(3)}")
    gpu = [e for e in ev if e.get("cat") in ("kernel", "gpu_memset", "gpu_memcpy")]
    streams = collections.Counter((e.get("cat"), e.get("args", {}).get("stream")) for e in gpu)
    log(f"[{name}] gpu events by stream {streams}")
    ann = [e for e in ev if e.get("cat") == "user_annotation"]
    log(f"[{name}] annotations {collections.Counter(e['name'] for e in ann).most_common(10)}")
    ops = [e for e in ev if e.get("cat") == "cpu_op"]
    top = collections.Counter(e["name"] for e in ops).most_common(8)
    log(f"[{name}] cpu_ops {len(ops)} top {top}")
    return k


def launches(ev):
    rt = [e for e in ev if e.get("cat") in ("cuda_runtime", "cuda_driver") and e["name"] in LAUNCH]
    rt.sort(key=lambda e: e["ts"])
    return rt


def per_correlation(ev):
    by = collections.defaultdict(list)
    for e in ev:
        if e.get("cat") in ("kernel", "gpu_memset", "gpu_memcpy"):
            by[e.get("args", {}).get("correlation")].append(e)
    for v in by.values():
        v.sort(key=lambda e: e["ts"])
    return by


def op_of(ev):
    """External id -> innermost cpu_op name (the op whose id the launch carries)."""
    return {
        e["args"].get("External id"): e["name"]
        for e in ev
        if e.get("cat") == "cpu_op" and "args" in e
    }


def compare_names(label, a, b):
    import difflib

    sm = difflib.SequenceMatcher(None, a, b, autojunk=False)
    same = sum(m.size for m in sm.get_matching_blocks())
    log(f"[{label}] {len(a)} vs {len(b)} names, {same} aligned in order")
    ca, cb = collections.Counter(x[:80] for x in a), collections.Counter(x[:80] for x in b)
    for key in sorted(set(ca) | set(cb)):
        if ca[key] != cb[key]:
            log(f"   {ca[key]:4d} {cb[key]:4d}  {key}")


def p50_ms(fn, n=50):
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(n):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e))
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=16)
    ap.add_argument("--bs", type=int, default=1)
    ap.add_argument("--prompt", type=int, default=128)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--skip-compile", action="store_true")
    args = ap.parse_args()
    import transformers
    from torch.profiler import ProfilerActivity, profile, record_function
    from transformers import LlamaConfig, LlamaForCausalLM, StaticCache

    log(
        "torch",
        torch.__version__,
        "cuda",
        torch.version.cuda,
        "transformers",
        transformers.__version__,
    )
    log(
        "gpu",
        torch.cuda.get_device_name(),
        "driver",
        torch.cuda.driver_version() if hasattr(torch.cuda, "driver_version") else "?",
    )
    try:
        from cuda.bindings import runtime as cudart  # noqa: F401

        log(
            "cuda.bindings present; cudaGraphNodeGetToolsId:",
            hasattr(cudart, "cudaGraphNodeGetToolsId"),
        )
    except Exception as e:
        log("cuda.bindings:", e)
    log(
        "torch.cuda.graphs has _graph_annotations:",
        os.path.exists(
            os.path.join(os.path.dirname(torch.__file__), "cuda", "_graph_annotations.py")
        ),
    )
    torch.manual_seed(0)
    cfg = LlamaConfig(
        vocab_size=128256,
        hidden_size=2048,
        intermediate_size=8192,
        num_hidden_layers=args.layers,
        num_attention_heads=32,
        num_key_value_heads=8,
        max_position_embeddings=4096,
        rope_theta=500000.0,
        tie_word_embeddings=True,
    )
    t = time.time()
    with torch.device("cuda"):
        model = LlamaForCausalLM(cfg)
    model = model.half().eval()
    log(
        f"params {sum(p.numel() for p in model.parameters()) / 1e9:.3f} B, "
        f"built in {time.time() - t:.1f} s"
    )
    bs, plen, steps = args.bs, args.prompt, args.steps
    total = plen + steps + 64
    prompt = torch.randint(0, cfg.vocab_size, (bs, plen), device="cuda")
    positions = torch.arange(total, device="cuda")
    cache = StaticCache(config=cfg, max_cache_len=total)

    def prefill(fwd=model):
        cache.reset()
        out = fwd(
            input_ids=prompt, past_key_values=cache, use_cache=True, cache_position=positions[:plen]
        )
        return out.logits[:, -1]

    token = torch.zeros((bs, 1), dtype=torch.long, device="cuda")
    pos = torch.zeros(1, dtype=torch.long, device="cuda")

    def step(fwd=model):
        out = fwd(input_ids=token, past_key_values=cache, use_cache=True, cache_position=pos)
        return out.logits[:, -1]

    with torch.inference_mode():
        # eager ---------------------------------------------------------------------------
        try:
            logits = prefill()
            token.copy_(logits.argmax(-1, keepdim=True))
            pos.fill_(plen)
            for _ in range(3):
                step()
            torch.cuda.synchronize()
            with profile(
                activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=False
            ) as prof:
                with record_function("prefill"):
                    logits = prefill()
                    token.copy_(logits.argmax(-1, keepdim=True))
                for i in range(steps):
                    with record_function("decode"):
                        pos.fill_(plen + i)
                        logits = step()
                        token.copy_(logits.argmax(-1, keepdim=True))
                torch.cuda.synchronize()
            ev = save(prof, f"eager_bs{bs}")
            describe("eager", ev)
            ann = [e for e in ev if e.get("cat") == "user_annotation" and e["name"] == "decode"]
            ann.sort(key=lambda e: e["ts"])
            # kernels of the 3rd decode step, in order (launched inside that span)
            rt = {
                e["args"]["correlation"]: e
                for e in ev
                if e.get("cat") in ("cuda_runtime", "cuda_driver")
            }
            span = ann[2]
            eager_names = [
                e["name"]
                for e in sorted(ev, key=lambda e: e["ts"])
                if e.get("cat") in ("kernel", "gpu_memset", "gpu_memcpy")
                and (launch := rt.get(e["args"].get("correlation"))) is not None
                and span["ts"] <= launch["ts"] <= span["ts"] + span["dur"]
            ]
            log(f"[eager] kernels in one decode step {len(eager_names)}")
            log(
                f"[eager] decode step p50 {p50_ms(step):.3f} ms; "
                f"prefill p50 {p50_ms(prefill, 10):.3f} ms"
            )
        except Exception:
            traceback.print_exc()
            eager_names = []

        # torch.cuda.graph, the capture profiled --------------------------------------------
        try:
            pos.fill_(plen + 3)
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(3):
                    step()
            torch.cuda.current_stream().wait_stream(side)
            torch.cuda.synchronize()
            g = torch.cuda.CUDAGraph()
            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                with record_function("capture"), torch.cuda.graph(g):
                    step()
                torch.cuda.synchronize()
            cap = save(prof, f"graph_capture_bs{bs}")
            describe("capture", cap)
            cl = launches(cap)
            ops = op_of(cap)
            log(f"[capture] launch calls {len(cl)}: {collections.Counter(e['name'] for e in cl)}")
            log(
                "[capture] launches with an External id "
                f"{sum(1 for e in cl if 'External id' in e.get('args', {}))}"
            )
            log(
                "[capture] first launches' ops "
                f"{[ops.get(e['args'].get('External id')) for e in cl[:12]]}"
            )
            g.replay()
            torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                for _ in range(3):
                    with record_function("decode"):
                        g.replay()
                torch.cuda.synchronize()
            rep = save(prof, f"graph_replay_bs{bs}")
            describe("replay", rep)
            by = per_correlation(rep)
            sizes = {c: len(v) for c, v in by.items()}
            log(f"[replay] gpu events per graph launch {sizes}")
            first = next(iter(by.values()))
            names = [e["name"] for e in first]
            log(f"[replay] per-launch count {len(first)} against {len(cl)} launch calls at capture")
            # what the capture's launch kinds say vs the replay's event kinds, in order
            kinds_cap = [
                "memset"
                if "Memset" in e["name"]
                else "memcpy"
                if "Memcpy" in e["name"]
                else "kernel"
                for e in cl
            ]
            kinds_rep = [e["cat"].replace("gpu_", "") for e in first]
            log(f"[replay] kind sequence equal to the capture's: {kinds_cap == kinds_rep}")
            if eager_names:
                compare_names("replay vs eager step", names, eager_names)
            log(f"[graph] replay p50 {p50_ms(g.replay):.3f} ms")
        except Exception:
            traceback.print_exc()

        # reduce-overhead ------------------------------------------------------------------
        if not args.skip_compile:
            try:
                compiled = torch.compile(model, mode="reduce-overhead")
                pos.fill_(plen)
                t = time.time()
                with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                    for i in range(4):
                        with record_function(f"call{i}"):
                            pos.fill_(plen + i)
                            logits = step(compiled)
                        torch.cuda.synchronize()
                log(f"[ro] first 4 calls in {time.time() - t:.1f} s")
                ev = save(prof, f"ro_first_calls_bs{bs}")
                describe("ro-first", ev)
                ann = {
                    e["name"]: e
                    for e in ev
                    if e.get("cat") == "user_annotation" and e["name"].startswith("call")
                }
                rtall = [e for e in ev if e.get("cat") in ("cuda_runtime", "cuda_driver")]
                for name in sorted(ann):
                    a = ann[name]
                    inside = [e for e in rtall if a["ts"] <= e["ts"] <= a["ts"] + a["dur"]]
                    corr = {e["args"]["correlation"] for e in inside}
                    ks = [
                        e
                        for e in ev
                        if e.get("cat") in ("kernel", "gpu_memset", "gpu_memcpy")
                        and e["args"].get("correlation") in corr
                    ]
                    log(
                        f"[ro-first] {name}: {a['dur'] / 1000:.1f} ms, runtime "
                        f"{collections.Counter(e['name'] for e in inside).most_common(6)}, "
                        f"gpu events {len(ks)}"
                    )
                for i in range(5):
                    pos.fill_(plen + 4 + i)
                    step(compiled)
                torch.cuda.synchronize()
                with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                    for i in range(3):
                        with record_function("decode"):
                            pos.fill_(plen + 10 + i)
                            logits = step(compiled)
                    torch.cuda.synchronize()
                ev = save(prof, f"ro_replay_bs{bs}")
                describe("ro-replay", ev)
                by = per_correlation(ev)
                log(
                    "[ro-replay] gpu events per launch correlation "
                    f"{sorted(collections.Counter(len(v) for v in by.values()).items())}"
                )
                big = max(by.values(), key=len)
                log(
                    f"[ro-replay] biggest group {len(big)} first names "
                    f"{[e['name'][:50] for e in big[:6]]}"
                )
                log(f"[ro] decode step p50 {p50_ms(lambda: step(compiled)):.3f} ms")
            except Exception:
                traceback.print_exc()
    log("done")


if __name__ == "__main__":
    sys.exit(main())
