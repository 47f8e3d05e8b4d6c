"""What a backend implementation is, and the registry the family modules add theirs to.

The facts of each backend (name, family, precision, what it needs) are data in
profiler.runs.backends; a family module registers the implementation of each of its names with
``implement``, and how its backends build the parts of the generation loops they run
(--workload generate) with ``generates``. The package's ``__init__`` looks them up and imports
the family modules; the family modules import this module, never the package's ``__init__``,
so the registry has no import loop.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from profiler.runs import backends as facts


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

    @property
    def family_facts(self) -> facts.Family:
        return facts.family(self.family)

    @property
    def generation(self) -> GenerationParts:
        """How this backend's family builds the generation loops' parts (a family that
        registered none runs none)."""
        return GENERATION.get(self.family, GenerationParts())

    def unavailable_reason(self, cuda_available: bool) -> str | None:
        reason = self.missing()
        if reason:
            return reason
        if self.needs_cuda and not cuda_available:
            return "needs a CUDA GPU, and torch sees none on this machine"
        return None


REGISTRY: dict[str, Backend] = {}

#: builds one generation loop's parts on a backend: (backend, model, the loop's input, config,
#: device) -> (the parts, that input on the device, notes)
PartsBuilder = Callable[..., tuple[Any, Any, dict]]


@dataclass(frozen=True)
class GenerationParts:
    """How one family's backends run --workload generate, by the loop's name
    (profiler.runs.backends.SEQ2SEQ, LM): the builder of each loop's parts it runs, and for a
    loop it does not run, its own reason when it knows one ((backend, config) -> one line)."""

    builders: Mapping[str, PartsBuilder] = field(default_factory=dict)
    refusals: Mapping[str, Callable[[Backend, Any], str]] = field(default_factory=dict)


#: each family's GenerationParts, by family name
GENERATION: dict[str, GenerationParts] = {}


def register(backend: Backend) -> Backend:
    REGISTRY[backend.name] = backend
    return backend


def implement(
    name: str, prepare: Callable[..., Prepared], missing: Callable[[], str | None] | None = None
) -> Backend:
    """Register the implementation of the backend ``name`` of profiler.runs.backends: its facts
    from there, its ``prepare`` (and availability check) from the family module."""
    spec = facts.spec(name)
    return register(
        Backend(
            name=spec.name,
            family=spec.family,
            precision=spec.precision,
            description=spec.description,
            needs_cuda=spec.needs_cuda,
            prepare=prepare,
            missing=missing or (lambda: None),
        )
    )


def generates(family: str, parts: GenerationParts) -> GenerationParts:
    """Register how the backends of ``family`` build the parts of the generation loops."""
    GENERATION[family] = parts
    return parts


def module_missing(module: str, extra: str | None = None) -> Callable[[], str | None]:
    """An availability check: the module imports here, or a line naming what to install."""

    def check() -> str | None:
        if importlib.util.find_spec(module) is None:
            hint = f'pip install -e ".[{extra}]"' if extra else f"pip install {module}"
            return f"the Python package {module!r} is not installed ({hint})"
        return None

    return check
