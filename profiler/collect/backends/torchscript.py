"""TorchScript: trace, freeze and optimize_for_inference, in FP32."""

from __future__ import annotations

import warnings

from profiler.collect.backends.base import Prepared, implement
from profiler.collect.backends.eager import place


def _prepare(model, inputs, config, device) -> Prepared:
    import torch

    model, inputs, notes = place(model, inputs, config, device, "fp32")
    with torch.inference_mode(False), torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # TorchScript's deprecation and tracer warnings
        traced = torch.jit.trace(model, inputs)
        frozen = torch.jit.freeze(traced.eval())
        optimized = torch.jit.optimize_for_inference(frozen)
    notes["torchscript"] = "trace + freeze + optimize_for_inference"

    def forward(*args):
        with torch.no_grad():
            return optimized(*args)

    return Prepared(fn=forward, inputs=inputs, notes=notes)


implement("torchscript_fp32", _prepare)
