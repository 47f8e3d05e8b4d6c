"""torch.compile with the Inductor backend (Triton kernels on GPU, C++ on CPU)."""

from __future__ import annotations

from functools import partial

from profiler.collect.backends.base import Prepared, implement
from profiler.collect.backends.eager import place


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


for _precision in ("fp32", "fp16", "bf16"):
    implement(f"inductor_{_precision}", partial(_prepare, precision=_precision))
