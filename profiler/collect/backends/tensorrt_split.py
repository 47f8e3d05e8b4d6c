"""The TensorRT family's generation (--workload generate): split Torch-TensorRT engines.

An encoder-decoder runs as the encoder, one decoder per padded target length (buckets of
loops.BUCKET up to the longest target, a static shape each: a decoder with a dynamic target
length from 1 failed to build at length 1 and ran slower than eager), and the projection; each
built, cached and reported on its own (tensorrt.cached_compile). A decoder-only LM is not
converted: its KV cache is a Python object the split-engine path does not export (one line).
"""

from __future__ import annotations

import dataclasses

from profiler.collect import engine_cache
from profiler.collect.backends import tensorrt as ttrt
from profiler.collect.backends.base import GenerationParts, generates
from profiler.collect.backends.eager import DTYPES, place
from profiler.runs.backends import LM, SEQ2SEQ, generating_backends


def _compile_parts(backend, model, config, plan, weights, environment, notes: dict) -> dict:
    """One TensorRT engine per part of ``plan`` (cached); their notes and files go into
    ``notes`` under the part's name."""
    import torch_tensorrt

    from profiler.collect.workloads import loops

    engines, split, artifacts = {}, {}, {}
    for part, method, inputs in plan:
        facts = ttrt.cache_facts(config, backend.precision, weights, inputs, environment, part=part)
        what = f"the {part} engine of {config.model} {backend.name}"
        compiled, part_notes, part_artifacts = ttrt.cached_compile(
            torch_tensorrt, loops.part_module(model, method).eval(), inputs, config, facts, what
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


def seq2seq_parts(backend, model, src, config, device):
    """The encoder-decoder as split engines: (Seq2SeqParts, src on the device, notes)."""
    import torch
    import torch_tensorrt

    from profiler.collect.workloads import loops

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


def _no_kv_cache(backend, config) -> str:
    """Why a decoder-only LM does not generate on a TensorRT backend."""
    return (
        f"{backend.name} does not convert {config.model} with a KV cache for "
        "--workload generate: the cache is a Python object that the split-engine "
        f"path does not export; use {generating_backends(LM)}"
    )


generates(
    "tensorrt",
    GenerationParts(builders={SEQ2SEQ: seq2seq_parts}, refusals={LM: _no_kv_cache}),
)
