"""Tensor parallelism for the Llama decoder (run --nproc N): each rank holds a shard of every
decoder layer, split by torch.distributed.tensor.parallel over a 1-D DeviceMesh of the N ranks.

The plan is Megatron's for a Llama block: the attention's q/k/v projections and the MLP's gate
and up projections are ColwiseParallel (each rank computes its heads and its slice of the
intermediate width from the whole hidden state), the attention's o projection and the MLP's
down projection RowwiseParallel (each rank's partial product, summed over the ranks: one
all-reduce after the attention and one after the MLP, per layer and per step). Embedding,
norms and the output projection stay whole on every rank. The attention's query and key/value
heads must split evenly over the ranks; transformers' Llama attention reshapes with ``-1``
heads and its StaticCache takes its head count from the first keys it stores, so a shard runs
the unchanged model code on its own heads.

A generation on the ranks differs from a run in one process only here: the GPU-time windows
of its phases (behind a sleep kernel, stopped by time) are not measured, since each rank could
stop after a different count while the others wait in a collective (TensorParallelGenerate).
"""

from __future__ import annotations

from typing import Any

from torch import nn

from profiler.collect import models
from profiler.collect.workloads.generate import Generate
from profiler.collect.workloads.protocol import RunContext
from profiler.errors import UserError
from profiler.runs.config import RunConfig
from profiler.runs.samples import ProcessWindow

#: each decoder layer's projections and how they split (module path inside the layer -> style)
PLAN = {
    "self_attn.q_proj": "colwise",
    "self_attn.k_proj": "colwise",
    "self_attn.v_proj": "colwise",
    "self_attn.o_proj": "rowwise",
    "mlp.gate_proj": "colwise",
    "mlp.up_proj": "colwise",
    "mlp.down_proj": "rowwise",
}
PARALLELISM = (
    "tensor parallel over a 1-D DeviceMesh: q/k/v, gate and up projections ColwiseParallel, "
    "o and down projections RowwiseParallel (torch.distributed.tensor.parallel)"
)
#: the models the plan fits (profiler.collect.models.LLAMA_SHAPES)
MODELS = tuple(models.LLAMA_SHAPES)


def check(config: RunConfig, nproc: int) -> None:
    """A one-line UserError unless ``config`` can run split over ``nproc`` ranks: a built-in
    Llama generating, its query and key/value heads divisible by ``nproc``."""
    if config.model not in MODELS:
        raise UserError(
            f"--nproc splits a Llama decoder over its ranks: use --model "
            f"{' or '.join(MODELS)} (got {config.model})"
        )
    if config.workload != "generate":
        raise UserError("--nproc runs tensor-parallel decode: pass --workload generate")
    shape = models.LLAMA_SHAPES[config.model]
    check_heads(shape.heads, shape.kv_heads, nproc, config.model)


def check_heads(heads: int, kv_heads: int, nproc: int, model: str) -> None:
    if heads % nproc or kv_heads % nproc:
        raise UserError(
            f"--nproc {nproc} does not split {model}'s attention evenly: {heads} query heads "
            f"and {kv_heads} key/value heads must both be divisible by the ranks"
        )


def parallelize(model: nn.Module, mesh: Any) -> nn.Module:
    """``model`` (a CausalLM around transformers' LlamaForCausalLM) with each decoder layer's
    projections sharded over ``mesh`` as PLAN says; the same module, changed in place."""
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        RowwiseParallel,
        parallelize_module,
    )

    styles = {"colwise": ColwiseParallel, "rowwise": RowwiseParallel}
    hf: Any = getattr(model, "model", None)
    layers = getattr(getattr(hf, "model", None), "layers", None)
    if layers is None:
        raise UserError("--nproc needs a Llama decoder (its model.layers)")
    hf_config = hf.config
    check_heads(
        hf_config.num_attention_heads,
        hf_config.num_key_value_heads,
        mesh.size(),
        type(hf).__name__,
    )
    plan = {path: styles[style]() for path, style in PLAN.items()}
    for layer in layers:
        parallelize_module(layer, mesh, plan)
    return model


class TensorParallelGenerate(Generate):
    """--workload generate on one rank of a tensor-parallel model: the same generation, its
    phases' latencies and enqueue times kept; their GPU-time windows left out (see the module
    doc)."""

    def __init__(self, run: RunContext) -> None:
        super().__init__(run)
        self.label = f" generate, tensor parallel over {_world_size()} ranks"

    def phase_windows(self, timed_details: object, use_cuda: bool) -> dict[str, ProcessWindow]:
        loop, self.loop = self.loop, None  # no calls: no GPU-time window per phase
        try:
            return super().phase_windows(timed_details, use_cuda)
        finally:
            self.loop = loop


def _world_size() -> int:
    import torch.distributed as dist

    return dist.get_world_size() if dist.is_initialized() else 1
