"""What one inference must do at least: FLOPs counted on the eager model, and minimum bytes
(weights once + inputs + outputs) at the run's precision. Collection side (imports torch); the
roofline itself is computed from this dict by ``profiler.trace.roofline``.

The count runs under ``torch.utils.flop_counter.FlopCounterMode`` on a copy of the model on the
``meta`` device (no memory, no arithmetic), falling back to the CPU when an operator has no meta
kernel. FlopCounterMode counts matmul, convolution and attention FLOPs (2 per multiply-add);
elementwise work is not counted.
"""

from __future__ import annotations

import copy

import torch
from torch.utils.flop_counter import FlopCounterMode

#: bytes per element of floating-point tensors at each backend precision
PRECISION_BYTES = {"fp32": 4, "tf32": 4, "fp16": 2, "bf16": 2, "fp8": 1, "int8": 1}


def _counted(model: torch.nn.Module, inputs: tuple, device: str) -> tuple[int, dict, tuple]:
    if device == "meta":
        model = copy.deepcopy(model).to("meta")
        inputs = tuple(t.to("meta") if isinstance(t, torch.Tensor) else t for t in inputs)
    counter = FlopCounterMode(display=False)
    with torch.no_grad(), counter:
        output = model(*inputs)
    per_op = {str(op).split(".")[-1] if "." in str(op) else str(op): int(n)
              for op, n in counter.get_flop_counts().get("Global", {}).items()}
    outputs = output if isinstance(output, (tuple, list)) else (output,)
    shapes = tuple(tuple(o.shape) for o in outputs if isinstance(o, torch.Tensor))
    return int(counter.get_total_flops()), per_op, shapes


def _numel(shape: tuple) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n


def _tensor_bytes(t: torch.Tensor, float_bytes: int) -> int:
    return t.numel() * (float_bytes if t.is_floating_point() else t.element_size())


def roofline_inputs(model: torch.nn.Module, inputs: tuple, precision: str,
                    batch_size: int) -> dict:
    """FLOPs and minimum bytes of one call of ``model(*inputs)`` (the whole batch): the dict the
    harness stores as result.json ``roofline_inputs``."""
    float_bytes = PRECISION_BYTES.get(precision, 4)
    how = "FlopCounterMode on the eager model (meta device)"
    try:
        flops, per_op, out_shapes = _counted(model, inputs, "meta")
    except Exception:  # an operator without a meta kernel: count on the CPU instead
        how = "FlopCounterMode on the eager model (CPU)"
        try:
            flops, per_op, out_shapes = _counted(model, inputs, "cpu")
        except Exception as error:  # the count is extra information: never stop the run
            return {"error": f"FLOPs not counted: {type(error).__name__}: "
                             f"{str(error).splitlines()[0][:200] if str(error) else ''}"}
    weights = sum(_tensor_bytes(p, float_bytes) for p in model.parameters()) + \
        sum(_tensor_bytes(b, float_bytes) for b in model.buffers())
    input_bytes = sum(_tensor_bytes(t, float_bytes) for t in inputs if isinstance(t, torch.Tensor))
    output_bytes = sum(_numel(s) for s in out_shapes) * float_bytes
    return {
        "flops_per_batch": flops,
        "flops_by_operator": per_op,
        "batch_size": batch_size,
        "weight_bytes": weights,
        "input_bytes": input_bytes,
        "output_bytes": output_bytes,
        "min_bytes_per_batch": weights + input_bytes + output_bytes,
        "bytes_per_element": float_bytes,
        "precision": precision,
        "method": how + "; min bytes = weights once + inputs + outputs at the run's precision",
    }
