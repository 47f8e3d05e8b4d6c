"""Greedy generation loops, their parts per backend family, and the clock that times them.

Encoder-decoder (``transformer``): encode the source once, then per new token run the decoder
over the whole target so far (recomputed, no KV cache: nn.Transformer has none) and project the
last position to the vocabulary; the argmax is appended. Decode step time therefore grows with
the position. Decoder-only (``gpt2``): prefill the prompt into the KV cache, then decode one token
per step from the cache. Both generate exactly ``max_new_tokens`` tokens (EOS is ignored), so
every backend does the same work.

Each phase runs inside a ``record_function`` span and an NVTX range of the same name
(``encode``, ``decode``, ``project``; ``prefill``, ``decode``): the trace's phase analysis
(profiler/trace/phase_kernels.py) attributes kernels to them.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from profiler.collect.device import nvtx_range

# first target token of the encoder-decoder (a fixed id: the weights are random anyway)
BOS = 1
# target lengths of statically shaped decoders are padded up to a multiple of this
BUCKET = 16


def phase(name: str):
    """A record_function span and an NVTX range, both called ``name``."""
    stack = contextlib.ExitStack()
    stack.enter_context(torch.profiler.record_function(name))
    stack.enter_context(nvtx_range(name))
    return stack


class Clock:
    """Marks on the device timeline (CUDA events, no host sync inside the loop) or, on the CPU,
    perf_counter readings; ``elapsed_ms`` reads them after one synchronize. Each mark also
    reads the host's clock: ``host_ms`` is the host's time between marks, the time to launch
    each phase's work (enqueue; on a GPU the loop never waits for the device inside)."""

    def __init__(self, use_cuda: bool) -> None:
        self.use_cuda = use_cuda
        self.marks: list = []
        self.host: list[float] = []

    def mark(self) -> None:
        if self.use_cuda:
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            self.marks.append(event)
        self.host.append(time.perf_counter())

    def elapsed_ms(self) -> list[float]:
        """Milliseconds between consecutive marks."""
        if self.use_cuda:
            self.marks[-1].synchronize()
            return [a.elapsed_time(b) for a, b in zip(self.marks, self.marks[1:])]
        return self.host_ms()

    def host_ms(self) -> list[float]:
        """The host's milliseconds between consecutive marks."""
        return [(b - a) * 1000.0 for a, b in zip(self.host, self.host[1:])]


class _NoClock:
    def mark(self) -> None:
        pass


@dataclass
class Generation:
    tokens: torch.Tensor  # [B, max_new_tokens], the greedy outputs
    first_logits: torch.Tensor  # [B, vocab], the logits that chose the first token
    encoder_output: torch.Tensor | None = None  # [B, S, d_model] (encoder-decoder only)


@dataclass
class Seq2SeqParts:
    """The three callables of an encoder-decoder, as one backend runs them.

    ``decode(tgt, memory)`` returns hidden states for at least ``tgt``'s positions (a padded
    decoder returns more; the loop reads position ``len - 1``)."""

    encode: Callable[[torch.Tensor], torch.Tensor]
    decode: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
    project: Callable[[torch.Tensor], torch.Tensor]


def greedy_seq2seq(
    parts: Seq2SeqParts, src: torch.Tensor, max_new_tokens: int, clock=None
) -> Generation:
    """Marks: start, after encode, after each token (``max_new_tokens + 2`` in all)."""
    clock = clock or _NoClock()
    with torch.inference_mode():
        clock.mark()
        with phase("encode"):
            memory = parts.encode(src)
        clock.mark()
        tgt = torch.full((src.size(0), 1), BOS, dtype=torch.long, device=src.device)
        first_logits: torch.Tensor | None = None
        for _ in range(max_new_tokens):
            with phase("decode"):
                hidden = parts.decode(tgt, memory)
            with phase("project"):
                logits = parts.project(hidden[:, tgt.size(1) - 1])
            if first_logits is None:
                first_logits = logits
            tgt = torch.cat([tgt, logits.argmax(-1, keepdim=True).to(tgt.dtype)], dim=1)
            clock.mark()
    assert first_logits is not None  # max_new_tokens >= 1 (RunConfig)
    return Generation(tokens=tgt[:, 1:], first_logits=first_logits, encoder_output=memory)


def bucket_length(length: int, max_len: int, bucket: int = BUCKET) -> int:
    """``length`` rounded up to a multiple of ``bucket``, capped at the model's positions."""
    return min(-(-length // bucket) * bucket, max_len)


def bucket_lengths(max_new_tokens: int, max_len: int, bucket: int = BUCKET) -> list[int]:
    """Every padded target length a generation of ``max_new_tokens`` tokens visits (the target
    holds BOS plus the tokens so far: 1 .. max_new_tokens)."""
    return sorted({bucket_length(n, max_len, bucket) for n in range(1, max_new_tokens + 1)})


def padded_decoder(
    decoders: dict[int, Callable], max_len: int, pad: int = BOS, bucket: int = BUCKET
):
    """A ``decode(tgt, memory)`` that pads ``tgt`` to its bucket and calls that bucket's
    statically shaped decoder. The decoder is causal, so the padding (after the last real
    position) cannot change the positions the loop reads."""

    def decode(tgt: torch.Tensor, memory: torch.Tensor) -> torch.Tensor:
        length = bucket_length(tgt.size(1), max_len, bucket)
        if length > tgt.size(1):
            fill = torch.full(
                (tgt.size(0), length - tgt.size(1)), pad, dtype=tgt.dtype, device=tgt.device
            )
            tgt = torch.cat([tgt, fill], dim=1)
        return decoders[length](tgt, memory)

    return decode


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


def part_module(model: nn.Module, method: str) -> nn.Module:
    """The encoder-decoder ``model``'s ``method`` (encode, decode or project) as a module whose
    forward names its inputs (_Part)."""
    return _PARTS[method](model, method)


# --------------------------------------------------------------------------------------------
# decoder-only LM with a KV cache


@dataclass
class LMParts:
    """``prefill(prompt) -> (logits of the last position, cache)`` and
    ``step(token [B, 1], position, cache) -> (logits [B, vocab], cache)``; ``decode(token,
    cache_position [1], cache) -> logits`` is one step on a position tensor (what a CUDA graph
    captures: its inputs keep their addresses), ``positions`` the cache positions' tensor."""

    prefill: Callable[[torch.Tensor], tuple[torch.Tensor, Any]]
    step: Callable[[torch.Tensor, int, Any], tuple[torch.Tensor, Any]]
    decode: Callable[[torch.Tensor, torch.Tensor, Any], torch.Tensor] | None = None
    positions: torch.Tensor | None = None
    cache: Any = None


def greedy_lm(parts: LMParts, prompt: torch.Tensor, max_new_tokens: int, clock=None) -> Generation:
    """Marks: start, after each token (``max_new_tokens + 1`` in all); the first token comes out
    of the prefill."""
    clock = clock or _NoClock()
    tokens = []
    with torch.inference_mode():
        clock.mark()
        with phase("prefill"):
            logits, cache = parts.prefill(prompt)
            token = logits.argmax(-1, keepdim=True)
        first_logits = logits
        tokens.append(token)
        clock.mark()
        for index in range(1, max_new_tokens):
            with phase("decode"):
                logits, cache = parts.step(token, prompt.size(1) + index - 1, cache)
                token = logits.argmax(-1, keepdim=True)
            tokens.append(token)
            clock.mark()
    return Generation(tokens=torch.cat(tokens, dim=1), first_logits=first_logits)


def _static_cache(hf_model, batch_size: int, prompt_len: int, positions, total: int, kind):
    """A StaticCache of ``total`` positions, its tensors allocated by an eager prefill outside
    any compiled code, so they are marked as static addresses (a graph may then update them in
    place: torch.compile's CUDA graphs skip a graph whose inputs mutate otherwise) and are
    inference tensors, as every later call runs in inference mode. It writes each update at a
    position counter of its own (reset() zeroes it), so every call after a prefill must be the
    next position, as in greedy_lm."""
    static = kind(config=hf_model.config, max_cache_len=total)
    with torch.inference_mode():
        ids = torch.ones(batch_size, prompt_len, dtype=torch.long, device=positions.device)
        hf_model(
            input_ids=ids,
            past_key_values=static,
            use_cache=True,
            cache_position=positions[:prompt_len],
        )
        static.reset()
    return static


def lm_parts(
    hf_model,
    batch_size: int,
    prompt_len: int,
    max_new_tokens: int,
    device,
    dtype,
    static_cache: bool,
    compile_step: Callable | None = None,
) -> LMParts:
    """Prefill and decode step of a Hugging Face causal LM.

    ``static_cache``: one transformers StaticCache of prompt + new tokens, allocated here and
    zeroed (``reset``) at each prefill, updated in place, so every decode step sees the same
    cache object and shapes (what a compiled step needs: a new cache object per generation
    would fail Dynamo's guards and recompile); otherwise a fresh DynamicCache per generation
    that grows by concatenation. Cache positions are slices of one device tensor, so no step
    copies from the host. ``compile_step`` wraps the model's forward (torch.compile), or None
    for eager."""
    from transformers import DynamicCache, StaticCache

    forward = compile_step(hf_model) if compile_step else hf_model
    total = prompt_len + max_new_tokens
    positions = torch.arange(total, device=device)
    static = (
        _static_cache(hf_model, batch_size, prompt_len, positions, total, StaticCache)
        if static_cache
        else None
    )

    def prefill(prompt):
        if static is not None:
            static.reset()
        cache = static if static is not None else DynamicCache(config=hf_model.config)
        out = forward(
            input_ids=prompt,
            past_key_values=cache,
            use_cache=True,
            cache_position=positions[: prompt.size(1)],
        )
        return out.logits[:, -1], out.past_key_values

    def decode(token, cache_position, cache):
        out = forward(
            input_ids=token, past_key_values=cache, use_cache=True, cache_position=cache_position
        )
        return out.logits[:, -1]

    def step(token, position, cache):
        return decode(token, positions[position : position + 1], cache), cache

    return LMParts(prefill=prefill, step=step, decode=decode, positions=positions, cache=static)
