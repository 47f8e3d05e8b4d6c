"""Plain PyTorch eager execution in FP32, FP16 and BF16.

Generation (--workload generate): the model's own encode / decode / project, or the decoder-only
LM with a transformers StaticCache, eager; with --cuda-graphs the LM's decode step is replayed
from one CUDA graph (profiler.collect.workloads.generation_parts.graphed_decode). The LM's parts
are torch.compile's too (inductor.py), with its forward compiled.
"""

from __future__ import annotations

from functools import partial

from profiler.collect.backends.base import GenerationParts, Prepared, generates, implement
from profiler.runs.backends import LM, SEQ2SEQ

DTYPES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}


def place(model, inputs, config, device, precision: str):
    """Move model and inputs to the device in the backend's precision and memory format.

    Only floating-point inputs change dtype (token ids stay integers). Conv nets in FP16/BF16
    use channels_last under ``--memory-format auto``: that is the layout cuDNN's Tensor Core
    kernels want. Returns (model, inputs, notes).
    """
    import torch

    from profiler.collect.models import is_conv_net

    dtype = getattr(torch, DTYPES[precision])
    conv = is_conv_net(model)
    fmt = config.memory_format
    if fmt == "auto":
        fmt = "channels_last" if conv and precision != "fp32" else "contiguous"
    channels_last = fmt == "channels_last" and conv
    memory_format = torch.channels_last if channels_last else torch.contiguous_format
    model = model.to(device=device, dtype=dtype, memory_format=memory_format)
    if torch.device(device).type == "cuda":
        # a model built on the GPU leaves its FP32 copy (cast away here) and its initialisation's
        # temporaries in the allocator's cache: given back, the allocator holds what it held
        # when models were built on the host, so peak reserved memory reads as before
        torch.cuda.empty_cache()

    def move(tensor):
        tensor = tensor.to(device)
        if tensor.is_floating_point():
            tensor = tensor.to(dtype)
            if tensor.dim() == 4 and memory_format is torch.channels_last:
                tensor = tensor.contiguous(memory_format=torch.channels_last)
        return tensor

    inputs = tuple(move(t) for t in inputs)
    notes = {
        "dtype": str(dtype).replace("torch.", ""),
        "memory_format": "channels_last" if channels_last else "contiguous",
    }
    return model, inputs, notes


def prepare(model, inputs, config, device, precision: str) -> Prepared:
    """Eager execution in ``precision``: the model placed, called under inference_mode."""
    import torch

    model, inputs, notes = place(model, inputs, config, device, precision)

    def forward(*args):
        with torch.inference_mode():
            return model(*args)

    return Prepared(fn=forward, inputs=inputs, notes=notes)


def seq2seq_parts(backend, model, src, config, device):
    """The encoder-decoder's own encode, decode and project, eager: (Seq2SeqParts, src on the
    device, notes)."""
    from profiler.collect.workloads import loops

    model, (src,), notes = place(model, (src,), config, device, backend.precision)
    notes["decode"] = "recomputes the whole target each step (no KV cache), exact lengths"
    return loops.Seq2SeqParts(model.encode, model.decode, model.project), src, notes


def lm_parts(backend, model, prompt, config, device, compile_step=None):
    """A decoder-only LM's prefill and decode step on a transformers StaticCache: (LMParts,
    prompt on the device, notes). ``compile_step`` wraps the HF model's forward (torch.compile),
    or None for eager."""
    import torch

    from profiler.collect.workloads import loops

    model, (prompt,), notes = place(model, (prompt,), config, device, backend.precision)
    dtype = getattr(torch, DTYPES[backend.precision])
    notes["kv_cache"] = (
        "transformers StaticCache of prompt + new tokens, allocated once and zeroed at each "
        "prefill (fixed shapes: every decode step launches the same work)"
    )
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


for _precision in ("fp32", "fp16", "bf16"):
    implement(f"pytorch_{_precision}", partial(prepare, precision=_precision))
generates("pytorch", GenerationParts(builders={SEQ2SEQ: seq2seq_parts, LM: lm_parts}))
