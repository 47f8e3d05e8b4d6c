"""The backends as facts: every backend's name, family, precision, what it needs and what it is,
and what each family does. Torch-free data, read by the options (``--backend`` choices), the
views and the analysis; ``profiler.collect.backends`` registers one implementation per name
here (tests/test_run_options.py checks that the two lists are the same).

A new backend is one row in ``BACKENDS`` (and a family row when it starts a family) plus its
implementation registered in ``profiler/collect/backends/``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TypeVar, overload

from profiler.errors import UserError

#: the backend every other one is checked against (the FP32 eager reference)
REFERENCE_BACKEND = "pytorch_fp32"
#: what --workload generate runs on (the loops of profiler.collect.workloads.loops)
SEQ2SEQ, LM = "encoder-decoder", "decoder-only"


@dataclass(frozen=True)
class Family:
    """What every backend of one family does, whatever its precision."""

    name: str  # "pytorch", "inductor", "torchscript", "tensorrt", "onnxruntime"
    prefix: str  # its backends' names start with this: "ttrt_" for tensorrt
    # the generation loops its backends run (--workload generate); empty: forward only
    generates: tuple[str, ...] = ()
    # why a generation loop it does not run is not run, when that is a known limit
    not_generating: str = ""
    # torch.compile compiles on the first call: the first call is the compile time when the
    # backend reports none of its own
    compiles_on_first_call: bool = False
    # what the backend's compile_s measured: (a notes key, its words) rows, the first row whose
    # key is in the notes (or whose key is None) wins
    compile_what: tuple[tuple[str | None, str], ...] = ((None, "TensorRT engine build"),)
    # for advise's experiments (profiler.analysis.experiments): the rough setup cost of a run on
    # this family relative to re-running eager (Inductor compiles, TensorRT builds an engine);
    # whether a launch-bound run tries --cuda-graphs (its capture and replay check passed on a
    # GPU: profiler.collect.cuda_graphs); whether a memory-bound run tries --memory-format
    # channels_last (its backends place tensors in the asked layout)
    setup_cost: float = 1.0
    tries_cuda_graphs: bool = False
    tries_channels_last: bool = False

    def compiled(self, notes: Mapping[str, object]) -> str:
        """What compile_s measured, from the backend's notes."""
        return next(words for key, words in self.compile_what if key is None or key in notes)


FAMILIES: dict[str, Family] = {
    f.name: f
    for f in (
        Family(
            "pytorch",
            "pytorch_",
            generates=(SEQ2SEQ, LM),
            tries_cuda_graphs=True,
            tries_channels_last=True,
        ),
        Family(
            "inductor",
            "inductor_",
            generates=(SEQ2SEQ, LM),
            compiles_on_first_call=True,
            setup_cost=3.0,
            tries_cuda_graphs=True,
        ),
        Family("torchscript", "torchscript_", setup_cost=1.5),
        Family(
            "tensorrt",
            "ttrt_",
            generates=(SEQ2SEQ,),
            not_generating="not a decoder-only LM (gpt2, llama): its KV cache is not converted",
            compile_what=(
                ("modelopt_import_s", "ModelOpt extension + TensorRT engine build"),
                (None, "TensorRT engine build"),
            ),
            setup_cost=4.0,
        ),
        Family(
            "onnxruntime",
            "ort_",
            compile_what=(("export_s", "ONNX export + session"), (None, "session (cached ONNX)")),
            setup_cost=3.0,
        ),
    )
}


@dataclass(frozen=True)
class BackendSpec:
    """One backend: its name and what it is, before anything is imported."""

    name: str
    family: str
    precision: str  # "fp32", "fp16", "bf16", "int8", "fp8"
    description: str
    needs_cuda: bool
    # the pyproject extra that installs what it needs (None: torch alone)
    extra: str | None = None

    @property
    def family_facts(self) -> Family:
        return FAMILIES[self.family]


def _eager(precision: str, needs_cuda: bool) -> BackendSpec:
    return BackendSpec(
        f"pytorch_{precision}",
        "pytorch",
        precision,
        f"PyTorch eager, {precision.upper()} weights and activations",
        needs_cuda,
    )


def _inductor(precision: str, needs_cuda: bool) -> BackendSpec:
    return BackendSpec(
        f"inductor_{precision}",
        "inductor",
        precision,
        f"torch.compile (Inductor), {precision.upper()}; mode from --compile-mode",
        needs_cuda,
    )


def _ort(precision: str, needs_cuda: bool) -> BackendSpec:
    return BackendSpec(
        f"ort_{precision}",
        "onnxruntime",
        precision,
        f"ONNX Runtime (CUDA EP, CPU EP without a GPU), {precision.upper()} model "
        "exported with torch.onnx.export(dynamo=True), IO binding",
        needs_cuda,
        extra="onnx",
    )


def _ttrt(precision: str) -> BackendSpec:
    return BackendSpec(
        f"ttrt_{precision}",
        "tensorrt",
        precision,
        f"Torch-TensorRT (dynamo), strongly typed {precision.upper()} engines; "
        "torch-tensorrt or torch-tensorrt-rtx",
        True,
        extra="tensorrt",
    )


def _modelopt(precision: str, note: str) -> BackendSpec:
    return BackendSpec(
        f"ttrt_{precision}",
        "tensorrt",
        precision,
        f"ModelOpt {precision.upper()} PTQ (calibrated) -> Torch-TensorRT, strongly typed ({note})",
        True,
        extra="fp8",
    )


#: every backend, by name
BACKENDS: dict[str, BackendSpec] = {
    b.name: b
    for b in (
        _eager("fp32", False),
        _eager("fp16", True),
        _eager("bf16", False),
        _inductor("fp32", False),
        _inductor("fp16", True),
        _inductor("bf16", False),
        BackendSpec(
            "inductor_int8",
            "inductor",
            "int8",
            "torchao INT8 Linear layers (dynamic, or static with --calib-batches/"
            "--calib-data) under torch.compile (Inductor)",
            False,
            extra="int8",
        ),
        BackendSpec(
            "torchscript_fp32",
            "torchscript",
            "fp32",
            "TorchScript trace, frozen and optimized for inference, FP32",
            False,
        ),
        _ttrt("fp32"),
        _ttrt("fp16"),
        _modelopt("int8", "full TensorRT only"),
        _modelopt("fp8", "compute capability 8.9+"),
        _ort("fp32", False),
        _ort("fp16", True),
    )
}


def names() -> tuple[str, ...]:
    """Every backend's name, sorted (the --backend choices)."""
    return tuple(sorted(BACKENDS))


_Spec = TypeVar("_Spec")


@overload
def spec(name: str, known: None = None) -> BackendSpec: ...
@overload
def spec(name: str, known: Mapping[str, _Spec]) -> _Spec: ...
def spec(name: str, known: Mapping[str, object] | None = None) -> object:
    """The backend called ``name`` (in ``known``, by default BACKENDS), or a one-line UserError
    listing the names."""
    known = BACKENDS if known is None else known
    try:
        return known[name]
    except KeyError:
        raise UserError(
            f"unknown backend {name!r}; choose one of: {', '.join(sorted(known))}"
        ) from None


def family(name: str) -> Family:
    """A family's facts; a family not in FAMILIES (a backend a test or plugin registered) does
    what a family with no facts does."""
    return FAMILIES.get(name) or Family(name, f"{name}_")


def generation_words(family: Family) -> str:
    """What --workload generate runs on a family, in words (the `backends` table)."""
    if not family.generates:
        return "--workload forward only"
    runs = " and ".join(family.generates)
    return f"generates: {runs}" + (f"; {family.not_generating}" if family.not_generating else "")


def families_generating(kind: str) -> list[Family]:
    """The families whose backends run the ``kind`` generation loop."""
    return [f for f in FAMILIES.values() if kind in f.generates]


def generating_backends(kind: str) -> str:
    """The backends that run the ``kind`` generation loop, in words: "pytorch_*, inductor_* or
    ttrt_*"."""
    names = [f"{family.prefix}*" for family in families_generating(kind)]
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"
