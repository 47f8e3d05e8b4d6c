"""torch.compile with the Inductor backend (Triton kernels on GPU, C++ on CPU).

Generation (--workload generate): ``torch.compile(dynamic=True)`` on each of encode, decode and
project: one graph with a symbolic target length instead of one recompile per length (a
per-length recompile would hit Dynamo's recompile limit of 8 past 8 lengths and fall back to
eager). The decoder-only LM's forward is compiled with a transformers StaticCache (eager.py's
LM parts), so the decode step keeps one shape.
"""

from __future__ import annotations

from functools import partial

from profiler.collect.backends import eager
from profiler.collect.backends.base import GenerationParts, Prepared, generates, implement
from profiler.collect.backends.eager import place
from profiler.runs.backends import LM, SEQ2SEQ


def _prepare(model, inputs, config, device, precision: str) -> Prepared:
    import torch

    model, inputs, notes = place(model, inputs, config, device, precision)
    compiled = torch.compile(model, mode=config.compile_mode, backend="inductor")
    notes["compile_mode"] = config.compile_mode

    def forward(*args):
        with torch.inference_mode():
            return compiled(*args)

    # torch.compile compiles on the first call; the harness times that call as part of prepare
    return Prepared(fn=forward, inputs=inputs, notes=notes)


def _seq2seq_parts(backend, model, src, config, device):
    """encode, decode and project each compiled with a symbolic target length: (Seq2SeqParts,
    src on the device, notes)."""
    import torch

    from profiler.collect.workloads import loops

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


def _lm_parts(backend, model, prompt, config, device):
    """eager.lm_parts with the HF model's forward compiled (compiled at the first prefill)."""
    import torch

    def compile_step(hf_model):
        return torch.compile(hf_model, mode=config.compile_mode, backend="inductor")

    parts, prompt, notes = eager.lm_parts(backend, model, prompt, config, device, compile_step)
    notes["compile_mode"] = config.compile_mode
    return parts, prompt, notes


for _precision in ("fp32", "fp16", "bf16"):
    implement(f"inductor_{_precision}", partial(_prepare, precision=_precision))
generates("inductor", GenerationParts(builders={SEQ2SEQ: _seq2seq_parts, LM: _lm_parts}))
