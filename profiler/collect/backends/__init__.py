"""Backend registry: a name -> how to turn (model, example inputs) into a callable to profile.

Each family lives in its own module and registers its backends here. A backend says whether it
can run on this machine, and why not, before anything heavy is imported.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field
from typing import Any, Callable

from profiler.errors import UserError


@dataclass
class Prepared:
    """What a backend hands the harness: the callable, the inputs to feed it, and what it did."""

    fn: Callable[..., Any]
    inputs: tuple
    # facts for the run metadata (memory format, compile mode, engine details, cache hits ...);
    # notes["artifacts"] = {file name: text} are written into the run folder, not into the notes
    notes: dict = field(default_factory=dict)
    # extra measurements the harness runs after the timed and profiled windows (so they cannot
    # perturb them), e.g. per-layer engine timing; returns notes to merge, artifacts included
    after_windows: Callable[[], dict] | None = None


@dataclass(frozen=True)
class Backend:
    name: str
    family: str  # "pytorch", "inductor", "torchscript", "tensorrt", "onnxruntime"
    precision: str  # "fp32", "fp16", "bf16", "int8", "fp8"
    description: str
    needs_cuda: bool
    # prepare(model, inputs, config, device) -> Prepared; imported lazily from the family module
    prepare: Callable[..., Prepared]
    # () -> None when usable here, else a one-line reason
    missing: Callable[[], str | None] = lambda: None

    def unavailable_reason(self, cuda_available: bool) -> str | None:
        reason = self.missing()
        if reason:
            return reason
        if self.needs_cuda and not cuda_available:
            return "needs a CUDA GPU, and torch sees none on this machine"
        return None


REGISTRY: dict[str, Backend] = {}


def register(backend: Backend) -> Backend:
    REGISTRY[backend.name] = backend
    return backend


def module_missing(module: str, extra: str | None = None) -> Callable[[], str | None]:
    """An availability check: the module imports here, or a line naming what to install."""

    def check() -> str | None:
        if importlib.util.find_spec(module) is None:
            hint = f'pip install -e ".[{extra}]"' if extra else f"pip install {module}"
            return f"the Python package {module!r} is not installed ({hint})"
        return None

    return check


def get(name: str) -> Backend:
    _load_families()
    try:
        return REGISTRY[name]
    except KeyError:
        raise UserError(
            f"unknown backend {name!r}; choose one of: {', '.join(sorted(REGISTRY))}"
        ) from None


def all_backends() -> list[Backend]:
    _load_families()
    return [REGISTRY[name] for name in sorted(REGISTRY)]


def _load_families() -> None:
    # importing a family module registers its backends; the modules import torch lazily
    from profiler.collect.backends import eager, inductor, onnxruntime, quantized, tensorrt, torchscript  # noqa: F401


def cuda_available() -> bool:
    """Whether torch is installed and sees a CUDA GPU (False without torch)."""
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        return False
    import torch

    return torch.cuda.is_available()
