"""What one inference must do at least: FLOPs counted on the eager model, and minimum bytes
(weights once + inputs + outputs) at the run's precision. Collection side (imports torch); the
roofline itself is computed from this dict by ``profiler.analysis.roofline``.

The count runs under ``torch.utils.flop_counter.FlopCounterMode``, as torch ships it, on a copy
of the model whose weights, like the inputs, are tensors on the ``meta`` device (no memory, no
arithmetic: a model on the GPU allocates nothing there, and nothing its forward keeps on the
module reaches the model), falling back to CPU copies when an operator has no meta kernel. The
count is never the model's first real call. Its first dispatch imports ``torch._dynamo``
(torch's dispatch modes are wrapped in ``torch._disable_dynamo``): about 1.5 s on a GPU host,
paid only when the count is not in the cache (below). FlopCounterMode counts matmul,
convolution and attention FLOPs (2 per multiply-add); elementwise work is not counted.

A count depends on the architecture and the input shapes only: for a built-in model it is kept in
the cache (``<engine cache>/flops/``, keyed by the model's code, input shapes, parameter shapes and
library versions) and read back by later runs of any backend.
"""

from __future__ import annotations

import contextlib
import copy
import json
from pathlib import Path
from typing import Any

import torch

from profiler.collect import engine_cache
from profiler.errors import first_line

CACHE_KIND = "flops"
CACHE_SUFFIX = ".flops"
CACHE_SCHEMA = 1

#: bytes per element of floating-point tensors at each backend precision
PRECISION_BYTES = {"fp32": 4, "tf32": 4, "fp16": 2, "bf16": 2, "fp8": 1, "int8": 1}


def _on(t: torch.Tensor, device: str) -> torch.Tensor:
    """A copy of ``t`` on ``device`` (``meta``: its shape and type only, no memory)."""
    if device == "meta":
        return torch.empty_like(t, device="meta")
    return t.detach().to(device, copy=True)


def _copy_on(model: torch.nn.Module, device: str) -> torch.nn.Module | None:
    """A copy of the module whose parameters and buffers are on ``device`` (each tied weight
    still tied), the model's own untouched: what its forward keeps on the module (a lazily
    compiled function, a cache, a flag) stays on the copy. None when the module cannot be
    copied (an attribute deepcopy refuses)."""
    memo: dict[int, Any] = {}
    for _, p in model.named_parameters(remove_duplicate=False):
        if id(p) not in memo:
            memo[id(p)] = torch.nn.Parameter(_on(p, device), requires_grad=p.requires_grad)
    for _, b in model.named_buffers(remove_duplicate=False):
        if id(b) not in memo:
            memo[id(b)] = _on(b, device)
    try:
        return copy.deepcopy(model, memo)
    except Exception:  # a lock, a file, a C object: the model is called with swapped tensors
        return None


def _counted(model: torch.nn.Module, inputs: tuple, device: str) -> tuple[int, dict, tuple]:
    """One call counted under FlopCounterMode, on a copy of the model and of the inputs on
    ``device`` (never the model's own tensors); where the module cannot be copied, the model
    called with its weights swapped for copies (torch.func.functional_call)."""
    inputs = tuple(_on(t, device) if isinstance(t, torch.Tensor) else t for t in inputs)
    from torch.utils.flop_counter import FlopCounterMode  # (triton: only when counting)

    counter = FlopCounterMode(display=False)
    copied = _copy_on(model, device)
    with torch.no_grad(), counter:
        if copied is not None:
            output = copied(*inputs)
        else:
            named = [
                *model.named_parameters(remove_duplicate=False),
                *model.named_buffers(remove_duplicate=False),
            ]
            tensors = {name: _on(t, device) for name, t in named}
            output = torch.func.functional_call(model, tensors, inputs)
    per_op = {
        str(op).split(".")[-1] if "." in str(op) else str(op): int(n)
        for op, n in counter.get_flop_counts().get("Global", {}).items()
    }
    outputs = output if isinstance(output, (tuple, list)) else (output,)
    shapes = tuple(tuple(o.shape) for o in outputs if isinstance(o, torch.Tensor))
    return int(counter.get_total_flops()), per_op, shapes


def count(model: torch.nn.Module, inputs: tuple) -> dict:
    """FLOPs of one call (``flops_per_batch``, ``flops_by_operator``), the output shapes and
    how they were counted; ``{"error": ...}`` when they could not be. Counted on the meta
    device (no memory, no arithmetic), on a copy of the model (``_counted``), under
    FlopCounterMode as torch ships it; where an operator has no meta kernel, on CPU copies.
    The model's own weights and state are never what the count runs on, so the count is not
    the model's first forward: its first real call is the backend's."""
    how = "FlopCounterMode on the eager model (meta device)"
    try:
        flops, per_op, out_shapes = _counted(model, inputs, "meta")
    except Exception:  # an operator without a meta kernel: count on the CPU instead
        how = "FlopCounterMode on the eager model (CPU)"
        try:
            flops, per_op, out_shapes = _counted(model, inputs, "cpu")
        except Exception as error:  # the count is extra information: never stop the run
            return {
                "error": f"FLOPs not counted: {type(error).__name__}: "
                f"{str(error).splitlines()[0][:200] if str(error) else ''}"
            }
    return {
        "flops_per_batch": flops,
        "flops_by_operator": per_op,
        "output_shapes": [list(s) for s in out_shapes],
        "how": how,
    }


def cached_count(
    model: torch.nn.Module, inputs: tuple, facts: dict | None, cache_dir: Path | None
) -> dict:
    """``count``, read from the cache when ``facts`` (the model's build facts; None for a model
    whose code is not known) found an entry there, else counted and stored. ``cache_dir``:
    None means no cache (--no-cache). An unreadable entry is counted again and replaced."""
    if facts is None or cache_dir is None:
        return count(model, inputs)
    facts = {
        "kind": "flops",
        "schema": CACHE_SCHEMA,
        **facts,
        "parameters": engine_cache.cache_key(
            [[name, list(t.shape)] for name, t in model.state_dict().items()]
        ),
    }
    found = engine_cache.lookup(cache_dir, facts, CACHE_SUFFIX)
    if found.hit:
        try:
            counted = json.loads(found.module_path.read_text(encoding="utf-8"))
            if isinstance(counted, dict) and isinstance(counted.get("flops_per_batch"), int):
                return counted
        except (OSError, ValueError):
            pass
    counted = count(model, inputs)
    if "error" not in counted:
        with contextlib.suppress(OSError):  # an unwritable cache costs the next run a count
            engine_cache.store(
                cache_dir,
                facts,
                lambda tmp: tmp.write_text(json.dumps(counted), encoding="utf-8"),
                suffix=CACHE_SUFFIX,
            )
    return counted


def _numel(shape: tuple) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n


def _tensor_bytes(t: torch.Tensor, float_bytes: int) -> int:
    return t.numel() * (float_bytes if t.is_floating_point() else t.element_size())


def roofline_inputs(
    model: torch.nn.Module,
    inputs: tuple,
    precision: str,
    batch_size: int,
    counted: dict | None = None,
) -> dict:
    """FLOPs and minimum bytes of one call of ``model(*inputs)`` (the whole batch): the dict the
    harness stores as result.json ``roofline_inputs``. ``counted``: the FLOP count already made
    (``count`` / ``cached_count``), else it is counted here."""
    counted = count(model, inputs) if counted is None else counted
    if "error" in counted:
        return {"error": counted["error"]}
    float_bytes = PRECISION_BYTES.get(precision, 4)
    weights = sum(_tensor_bytes(p, float_bytes) for p in model.parameters()) + sum(
        _tensor_bytes(b, float_bytes) for b in model.buffers()
    )
    input_bytes = sum(_tensor_bytes(t, float_bytes) for t in inputs if isinstance(t, torch.Tensor))
    output_bytes = sum(_numel(s) for s in counted["output_shapes"]) * float_bytes
    return _inputs(
        counted["flops_per_batch"],
        counted["flops_by_operator"],
        batch_size,
        (weights, input_bytes, output_bytes),
        precision,
        counted["how"] + "; min bytes = weights once + inputs + outputs at the run's precision",
    )


def _inputs(
    flops: int,
    per_op: dict,
    batch_size: int,
    nbytes: tuple[int, int, int],
    precision: str,
    method: str,
) -> dict:
    """result.json's ``roofline_inputs``: FLOPs and the minimum bytes (weights, inputs,
    outputs: ``nbytes``) of one call of the batch."""
    weights, input_bytes, output_bytes = nbytes
    return {
        "flops_per_batch": flops,
        "flops_by_operator": per_op,
        "batch_size": batch_size,
        "weight_bytes": weights,
        "input_bytes": input_bytes,
        "output_bytes": output_bytes,
        "min_bytes_per_batch": weights + input_bytes + output_bytes,
        "bytes_per_element": PRECISION_BYTES.get(precision, 4),
        "precision": precision,
        "method": method,
    }


def _lm_phase(hf_model, tensors: dict, batch_size: int, tokens: int, cached: int) -> dict:
    """FLOPs of one call of a Hugging Face causal LM on ``tokens`` new positions after a cache
    of ``cached`` positions (filled first, uncounted), on the meta device."""
    from torch.utils.flop_counter import FlopCounterMode
    from transformers import DynamicCache

    def ids(length: int) -> torch.Tensor:
        return torch.zeros(batch_size, length, dtype=torch.long, device="meta")

    cache = DynamicCache(config=hf_model.config)
    with torch.no_grad():
        if cached:
            torch.func.functional_call(
                hf_model, tensors, (), {"input_ids": ids(cached), "past_key_values": cache}
            )
        counter = FlopCounterMode(display=False)
        with counter:
            out = torch.func.functional_call(
                hf_model, tensors, (), {"input_ids": ids(tokens), "past_key_values": cache}
            )
    per_op = {
        str(op).split(".")[-1] if "." in str(op) else str(op): int(n)
        for op, n in counter.get_flop_counts().get("Global", {}).items()
    }
    return {
        "flops": int(counter.get_total_flops()),
        "per_op": per_op,
        "logits": list(out.logits.shape),
    }


def lm_phase_inputs(
    hf_model: torch.nn.Module,
    batch_size: int,
    prompt_len: int,
    new_tokens: int,
    precision: str,
) -> dict:
    """A decoder-only LM's two phases as the roofline reads them, each like ``roofline_inputs``
    (FLOPs, minimum bytes): ``prefill`` (the prompt; its logits as the model computes them)
    and ``decode`` (one step at the middle of the decode, its cache holding prompt_len +
    new_tokens // 2 - 1 positions, as profiler.collect.workloads.generate's decode window).
    Minimum bytes: the weights once, the token ids, the KV cache the phase reads (decode) or
    writes (prefill: every prompt position; decode: one), and the logits. Counted with
    FlopCounterMode on the meta device (no memory, no arithmetic); {"error": ...} when it
    could not be."""
    float_bytes = PRECISION_BYTES.get(precision, 4)
    # (tied weights once: functional_call ties them again)
    named = [*hf_model.named_parameters(), *hf_model.named_buffers()]
    tensors = {name: torch.empty_like(t, device="meta") for name, t in named}
    config: Any = hf_model.config
    heads = getattr(config, "num_key_value_heads", None) or config.num_attention_heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    # keys and values of one position, every layer, the whole batch
    kv_position = 2 * config.num_hidden_layers * heads * head_dim * batch_size * float_bytes
    weights = sum(_tensor_bytes(p, float_bytes) for p in hf_model.parameters())
    cached = prompt_len + max(new_tokens // 2, 1) - 1
    try:
        prefill = _lm_phase(hf_model, tensors, batch_size, prompt_len, 0)
        decode = _lm_phase(hf_model, tensors, batch_size, 1, cached)
    except Exception as error:  # the count is extra information: never stop the run
        return {"error": f"FLOPs not counted: {type(error).__name__}: {first_line(error)[:200]}"}
    found = {}
    for phase, counted, tokens, kv_bytes in (
        ("prefill", prefill, prompt_len, prompt_len * kv_position),
        ("decode", decode, 1, (cached + 1) * kv_position),
    ):
        input_bytes = batch_size * tokens * 8 + kv_bytes
        output_bytes = _numel(tuple(counted["logits"])) * float_bytes
        found[phase] = _inputs(
            counted["flops"],
            counted["per_op"],
            batch_size,
            (weights, input_bytes, output_bytes),
            precision,
            "FlopCounterMode on the eager model (meta device), one "
            f"{'prefill of the prompt' if phase == 'prefill' else 'decode step'}; min bytes = "
            "weights once + token ids + the KV cache "
            + ("written" if phase == "prefill" else f"read ({cached} positions) and written")
            + " + logits, at the run's precision",
        )
    return found
