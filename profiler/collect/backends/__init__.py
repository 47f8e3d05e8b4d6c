"""Backend registry: a name -> how to turn (model, example inputs) into a callable to profile.

The backends' facts are data in profiler.runs.backends; each family module implements its
names (``base.implement``). A backend says whether it can run on this machine, and why not,
before anything heavy is imported.
"""

from __future__ import annotations

from profiler.collect.backends.base import (  # noqa: F401  (the registry's face)
    REGISTRY,
    Backend,
    Prepared,
    implement,
    module_missing,
    register,
)
from profiler.runs import backends as facts


def get(name: str) -> Backend:
    _load_families()
    return facts.spec(name, REGISTRY)


def all_backends() -> list[Backend]:
    _load_families()
    return [REGISTRY[name] for name in sorted(REGISTRY)]


def _load_families() -> None:
    # importing a family module registers its backends and how they generate (they import
    # torch lazily); imported when first asked, so that this package's face never imports its
    # own children at load
    from profiler.collect.backends import (  # noqa: F401
        eager,
        inductor,
        onnxruntime,
        quantized,
        tensorrt,
        tensorrt_split,
        torchscript,
    )


def cuda_available() -> bool:
    """Whether torch is installed and sees a CUDA GPU (False without torch)."""
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        return False
    import torch

    return torch.cuda.is_available()
