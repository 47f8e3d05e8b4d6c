"""The generation loop's parts as each backend family runs them.

- pytorch_*: the model's own encode / decode / project (or the LM with a StaticCache), eager;
  with --cuda-graphs the LM's decode step is replayed from one CUDA graph (graphed_decode).
- inductor_*: ``torch.compile(dynamic=True)`` on each of encode, decode and project: one graph
  with a symbolic target length instead of one recompile per length (a per-length recompile
  would hit Dynamo's recompile limit of 8 past 8 lengths and fall back to eager). The LM's
  forward is compiled with a transformers StaticCache, so the decode step keeps one shape.
- ttrt_*: split Torch-TensorRT engines: the encoder, one decoder per padded target length
  (buckets of loops.BUCKET up to the longest target, a static shape each: a decoder with a
  dynamic target length from 1 failed to build at length 1 and ran slower than eager), and the
  projection; each built, cached and reported on its own. The LM is not converted (one line).
"""

from __future__ import annotations

import dataclasses

import torch
from torch import nn

from profiler.collect import cuda_graphs
from profiler.collect.backends.base import Prepared
from profiler.collect.backends.eager import DTYPES, place
from profiler.collect.workloads import loops
from profiler.errors import UserError
from profiler.runs import backends as facts


class _Part(nn.Module):
    """One method of a model as a module's forward (what torch.export and TensorRT compile).
    Torch-TensorRT's tracer keys the dynamic shapes it hands torch.export by the forward's
    parameter names, so each part's forward names its inputs (a ``*args`` forward is one
    parameter holding a tuple, which torch.export refuses)."""

    def __init__(self, model: nn.Module, method: str) -> None:
        super().__init__()
        self.model = model
        self.method = method


class _Encoder(_Part):
    def forward(self, src):
        return self.model.encode(src)


class _Decoder(_Part):
    def forward(self, tgt, memory):
        return self.model.decode(tgt, memory)


class _Projection(_Part):
    def forward(self, hidden):
        return self.model.project(hidden)


_PARTS = {"encode": _Encoder, "decode": _Decoder, "project": _Projection}


def _eager_seq2seq(backend, model, src, config, device):
    model, (src,), notes = place(model, (src,), config, device, backend.precision)
    notes["decode"] = "recomputes the whole target each step (no KV cache), exact lengths"
    return loops.Seq2SeqParts(model.encode, model.decode, model.project), src, notes


def _compiled_seq2seq(backend, model, src, config, device):
    model, (src,), notes = place(model, (src,), config, device, backend.precision)

    def compiled(method):
        return torch.compile(
            getattr(model, method), mode=config.compile_mode, backend="inductor", dynamic=True
        )

    notes.update(
        compile_mode=config.compile_mode,
        dynamic=True,
        decode="recomputes the whole target each step (no KV cache), exact "
        "lengths; torch.compile(dynamic=True) on encode, decode and project",
    )
    return (
        loops.Seq2SeqParts(compiled("encode"), compiled("decode"), compiled("project")),
        src,
        notes,
    )


def _uses(kind: str) -> str:
    """ "pytorch_*, inductor_* or ttrt_*": the families that run the ``kind`` loop."""
    names = [f"{family.prefix}*" for family in facts.families_generating(kind)]
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"


def _check_generates(backend, kind: str) -> None:
    if kind not in backend.family_facts.generates:
        raise UserError(
            f"backend {backend.name} cannot run --workload generate; use a {_uses(kind)} backend"
        )


def seq2seq_parts(backend, model, src, config, device):
    """(Seq2SeqParts, src on the device, notes)."""
    _check_generates(backend, facts.SEQ2SEQ)
    return SEQ2SEQ_PARTS[backend.family](backend, model, src, config, device)


def lm_parts(backend, model, prompt, config, device):
    """(LMParts, prompt on the device, notes) for a CausalLM wrapper around a HF model."""
    if backend.family == "tensorrt":  # it generates, but not with a KV cache
        raise UserError(
            f"{backend.name} does not convert {config.model} with a KV cache for "
            "--workload generate: the cache is a Python object that the split-engine "
            f"path does not export; use {_uses(facts.LM)}"
        )
    _check_generates(backend, facts.LM)
    model, (prompt,), notes = place(model, (prompt,), config, device, backend.precision)
    dtype = getattr(torch, DTYPES[backend.precision])
    compile_step = None
    notes["kv_cache"] = (
        "transformers StaticCache of prompt + new tokens, allocated once and zeroed at each "
        "prefill (fixed shapes: every decode step launches the same work)"
    )
    if backend.family_facts.compiles_on_first_call:

        def compile_step(hf_model):
            return torch.compile(hf_model, mode=config.compile_mode, backend="inductor")

        notes["compile_mode"] = config.compile_mode
    parts = loops.lm_parts(
        model.model,
        prompt.size(0),
        prompt.size(1),
        config.max_new_tokens,
        device,
        dtype,
        static_cache=True,
        compile_step=compile_step,
    )
    return parts, prompt, notes


def graphed_decode(
    parts: loops.LMParts,
    prompt: torch.Tensor,
    backend_name: str,
    say,
    notes: dict,
    profiled: bool = True,
) -> loops.LMParts:
    """--cuda-graphs for a decoder-only LM: the decode step captured into one CUDA graph, on
    static token and cache-position tensors, right after a prefill of ``prompt`` (the first
    decode step's state); every step then copies its token and position in and replays it
    (profiler.collect.cuda_graphs: warm-up on a side stream, the capture profiled, one replay
    checked against a plain step from the same state, each after a prefill: the cache writes
    at a position counter of its own). The prefill runs as the backend runs it. The capture's
    notes and graph_captures.json go into ``notes``."""
    assert parts.decode is not None and parts.positions is not None
    decode, positions, cache = parts.decode, parts.positions, parts.cache
    first = positions[prompt.size(1) : prompt.size(1) + 1]
    with torch.inference_mode():
        logits, _ = parts.prefill(prompt)
        token = logits.argmax(-1, keepdim=True)

        def reset():
            parts.prefill(prompt)

        plain = Prepared(fn=lambda t, p: decode(t, p, cache), inputs=(token, first.clone()))
        captured = cuda_graphs.capture(
            plain, backend_name, say, "the decode step", profiled, reset=reset
        )
    notes["cuda_graphs"] = captured.notes["cuda_graphs"]
    notes["graph_captures"] = captured.notes["graph_captures"]
    notes.setdefault("artifacts", {}).update(captured.notes.get("artifacts", {}))
    replay = captured.fn

    def step(token, position, cache):
        return replay(token, positions[position : position + 1]), cache

    return dataclasses.replace(parts, step=step)


# --------------------------------------------------------------------------------------------
# split TensorRT engines


def _compile_parts(backend, model, config, plan, weights, environment, notes: dict) -> dict:
    """One TensorRT engine per part of ``plan`` (cached); their notes and files go into
    ``notes`` under the part's name."""
    import torch_tensorrt

    from profiler.collect.backends import tensorrt as ttrt

    engines, split, artifacts = {}, {}, {}
    for part, method, inputs in plan:
        facts = ttrt.cache_facts(config, backend.precision, weights, inputs, environment, part=part)
        what = f"the {part} engine of {config.model} {backend.name}"
        compiled, part_notes, part_artifacts = ttrt.cached_compile(
            torch_tensorrt, _PARTS[method](model, method).eval(), inputs, config, facts, what
        )
        engines[part] = compiled
        notes["warnings"] += [f"{part}: {w}" for w in part_notes.pop("warnings")]
        split[part] = part_notes
        for name, text in part_artifacts.items():
            artifacts[f"{part}_{name}"] = text
        split[part]["layer_files"] = [f"{part}_{name}" for name in part_notes["layer_files"]]
    notes["split_engines"] = split
    for key in ("compile_s", "load_s"):  # the split's totals, as a whole build reports them
        if any(key in p for p in split.values()):
            notes[key] = sum(p.get(key, 0.0) for p in split.values())
    notes["artifacts"] = artifacts
    return engines


def _tensorrt_seq2seq(backend, model, src, config, device):
    import torch_tensorrt

    from profiler.collect import engine_cache
    from profiler.collect.backends import tensorrt as ttrt

    flavour, environment = ttrt.environment_facts(torch, torch_tensorrt)
    config = dataclasses.replace(config, memory_format="contiguous")
    weights = engine_cache.state_dict_digest(model)
    model, (src,), notes = place(model, (src,), config, device, backend.precision)
    dtype = getattr(torch, DTYPES[backend.precision])
    with torch.no_grad():  # an ordinary tensor (not an inference one) as the export example
        memory = model.encode(src)
    batch, d_model = src.size(0), memory.size(-1)
    # a custom encoder-decoder may not say how many positions it has: no cap then
    max_len = getattr(model, "max_len", None) or loops.bucket_length(config.max_new_tokens, 1 << 30)
    lengths = loops.bucket_lengths(config.max_new_tokens, max_len)
    plan = [("encoder", "encode", (src,))]
    plan += [
        (
            f"decoder_len{length}",
            "decode",
            (torch.full((batch, length), loops.BOS, dtype=torch.long, device=device), memory),
        )
        for length in lengths
    ]
    plan.append(
        ("projection", "project", (torch.zeros(batch, d_model, dtype=dtype, device=device),))
    )
    notes.update(
        {
            "flavour": flavour.name,
            "distribution": flavour.distribution,
            "versions": environment["versions"],
            "compile_options": ttrt.COMPILE_OPTIONS,
            "tf32": config.tf32,
            "warnings": [],
            "decode": f"recomputes the whole target each step, padded to buckets of "
            f"{loops.BUCKET} (static shapes, causal mask): one decoder engine "
            f"per target length {lengths}",
        }
    )
    engines = _compile_parts(backend, model, config, plan, weights, environment, notes)

    def call(part):  # engines take contiguous inputs (the projection's is a strided slice)
        return lambda *args: engines[part](*(a.contiguous() for a in args))

    decoders = {length: call(f"decoder_len{length}") for length in lengths}
    parts = loops.Seq2SeqParts(
        call("encoder"), loops.padded_decoder(decoders, max_len), call("projection")
    )
    return parts, src, notes


#: how each family that generates builds the encoder-decoder's parts
SEQ2SEQ_PARTS = {
    "pytorch": _eager_seq2seq,
    "inductor": _compiled_seq2seq,
    "tensorrt": _tensorrt_seq2seq,
}
