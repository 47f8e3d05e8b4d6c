"""Real traces for the memory, module and rank views, recorded on the GPU machine with
torch.profiler itself (so the views can be checked against the same files tb_plugin reads):

- modules_<model>.pt.trace.json.gz: a Llama-style decoder (the tool's `llama-tiny` and `llama`
  shapes, random weights, seed 0) generating a few tokens, one prefill and the decode steps each
  under its own record_function span ("prefill", "decode"), recorded with_modules=True and
  profile_memory=True (the nn.Module hierarchy and the allocator's [memory] events);
- snapshot_<model>.pickle.gz: torch.cuda.memory._snapshot() after one generation recorded under
  torch.cuda.memory._record_memory_history (the allocation stacks; PyTorch's memory_viz opens it);
- nccl_one_gpu.log: whether NCCL lets two ranks share one GPU (it does not, so two ranks need two).

Usage on the GPU machine: OUT=<folder> python3 scripts/device_memory_modules_fixtures.py
"""

import gzip
import os
import pickle
import subprocess
import sys
import time

import torch
from torch.profiler import ProfilerActivity, profile, record_function

OUT = os.environ.get("OUT", "device_out")
os.makedirs(OUT, exist_ok=True)
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.get_device_name())
import transformers  # noqa: E402
from transformers import LlamaConfig, LlamaForCausalLM  # noqa: E402

from profiler.collect.models import LLAMA_SHAPES  # noqa: E402

print("transformers", transformers.__version__)


def model_of(name):
    shape = LLAMA_SHAPES[name]
    torch.manual_seed(0)
    cfg = LlamaConfig(
        vocab_size=shape.vocab,
        hidden_size=shape.hidden,
        intermediate_size=shape.intermediate,
        num_hidden_layers=shape.layers,
        num_attention_heads=shape.heads,
        num_key_value_heads=shape.kv_heads,
        max_position_embeddings=shape.positions,
        rope_parameters={"rope_type": "default", "rope_theta": 500000.0},
        tie_word_embeddings=shape.tied,
    )
    return LlamaForCausalLM(cfg).cuda().half().eval(), shape


def generate(model, shape, bs, prompt, new):
    tokens = torch.randint(0, shape.vocab, (bs, prompt), device="cuda")
    with torch.no_grad():
        with record_function("prefill"):
            out = model(tokens, use_cache=True)
            cache = out.past_key_values
            nxt = out.logits[:, -1:].argmax(-1)
        for _ in range(new - 1):
            with record_function("decode"):
                out = model(nxt, past_key_values=cache, use_cache=True)
                cache = out.past_key_values
                nxt = out.logits[:, -1:].argmax(-1)
    torch.cuda.synchronize()


def gz(path):
    with open(path, "rb") as a, gzip.open(path + ".gz", "wb", compresslevel=9) as b:
        b.write(a.read())
    os.remove(path)
    print(path + ".gz", os.path.getsize(path + ".gz"), "bytes")


for name, bs, prompt, new in (("llama-tiny", 2, 32, 6), ("llama", 1, 32, 3)):
    model, shape = model_of(name)
    generate(model, shape, bs, prompt, new)  # warm up
    with profile(
        activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
        with_modules=True,
        with_stack=True,
        profile_memory=True,
        record_shapes=True,
    ) as prof:
        generate(model, shape, bs, prompt, new)
    path = os.path.join(OUT, f"modules_{name}.pt.trace.json")
    prof.export_chrome_trace(path)
    gz(path)
    torch.cuda.memory._record_memory_history(max_entries=100000)
    generate(model, shape, bs, prompt, new)
    snap = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    spath = os.path.join(OUT, f"snapshot_{name}.pickle")
    with open(spath, "wb") as f:
        pickle.dump(snap, f)
    gz(spath)
    print(
        name,
        "bs",
        bs,
        "prompt",
        prompt,
        "new",
        new,
        "peak allocated",
        torch.cuda.max_memory_allocated(),
    )
    del model
    torch.cuda.empty_cache()

# two NCCL ranks on one GPU
probe = r"""
import os, torch, torch.distributed as dist
dist.init_process_group("nccl")
torch.cuda.set_device(0)
t = torch.ones(4, device="cuda")
dist.all_reduce(t)
torch.cuda.synchronize()
print("rank", dist.get_rank(), "all_reduce", t.tolist())
dist.destroy_process_group()
"""
with open("/tmp/nccl_probe.py", "w") as f:
    f.write(probe)
began = time.time()
r = subprocess.run(
    [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "/tmp/nccl_probe.py"],
    capture_output=True,
    text=True,
    timeout=120,
)
with open(os.path.join(OUT, "nccl_one_gpu.log"), "w") as f:
    f.write(r.stdout + r.stderr + f"\nexit {r.returncode}\n")
print("nccl two ranks on one GPU: exit", r.returncode, f"{time.time() - began:.1f} s")
print(
    "\n".join(
        line for line in (r.stdout + r.stderr).splitlines() if "uplicate" in line or "rank" in line
    )[:1500]
)
