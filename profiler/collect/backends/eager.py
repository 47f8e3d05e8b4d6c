"""Plain PyTorch eager execution in FP32, FP16 and BF16."""

from __future__ import annotations

from functools import partial

from profiler.collect.backends.base import Prepared, implement

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


for _precision in ("fp32", "fp16", "bf16"):
    implement(f"pytorch_{_precision}", partial(prepare, precision=_precision))
