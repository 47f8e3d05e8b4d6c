"""The parts of a generation loop for a backend, and --cuda-graphs for a decoder-only LM's decode
step.

Each backend family builds the parts of the loops it runs and registers how with its backends
(profiler.collect.backends.base.GenerationParts): eager PyTorch in collect/backends/eager.py,
torch.compile in inductor.py, split Torch-TensorRT engines in tensorrt_split.py. A loop asks
the backend's family for its parts here; a family that does not run the loop is refused in one
line, in its own words where it has them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import torch

from profiler.collect import cuda_graphs
from profiler.collect.backends.base import Backend, PartsBuilder, Prepared
from profiler.collect.workloads import loops
from profiler.errors import UserError
from profiler.notices import Say
from profiler.runs import backends as facts
from profiler.runs.config import RunConfig


def seq2seq_parts(backend: Backend, model, src, config: RunConfig, device):
    """(Seq2SeqParts, src on the device, notes)."""
    return _builder(backend, facts.SEQ2SEQ, config)(backend, model, src, config, device)


def lm_parts(backend: Backend, model, prompt, config: RunConfig, device):
    """(LMParts, prompt on the device, notes) for a CausalLM wrapper around a HF model."""
    return _builder(backend, facts.LM, config)(backend, model, prompt, config, device)


def _builder(backend: Backend, kind: str, config: RunConfig) -> PartsBuilder:
    """What builds the ``kind`` loop's parts on ``backend``'s family, or a one-line UserError."""
    generation = backend.generation
    build = generation.builders.get(kind)
    if build is not None:
        return build
    refusal: Callable[[Backend, RunConfig], str] | None = generation.refusals.get(kind)
    raise UserError(
        refusal(backend, config)
        if refusal is not None
        else f"backend {backend.name} cannot run --workload generate; use a "
        f"{facts.generating_backends(kind)} backend"
    )


def graphed_decode(
    parts: loops.LMParts,
    prompt: torch.Tensor,
    backend_name: str,
    say: Say,
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
