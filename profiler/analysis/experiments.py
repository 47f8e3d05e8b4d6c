"""The experiments that test each advice rule, as run-option changes: data beside the rules of
profiler.analysis.advice, and the plan `advise` makes of them for one run (``plan``). Pure: no
clock, no I/O, no torch.

Each rule names what would show it right (``EXPERIMENTS``: rule id -> makers of option changes
from the run's config, each with the source of the idea). ``plan`` collects the experiments of
the rules that fired, drops duplicates and changes that are no change, and ranks them: most
promising first per unit of cost, where the promise is the rule's own projection, a bound or
an estimate (``promise``, profiler.analysis.advice's formulas) and the cost a rough order of
the time an experiment takes to set up (its backend family's ``setup_cost`` in
profiler.runs.backends: an eager switch is one, an Inductor compile three, a TensorRT engine
build four). Which families try which option is a family fact there too.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from profiler.analysis.advice import CPU_GUIDE, Advice
from profiler.analysis.records import ProjectionKind
from profiler.runs.backends import BACKENDS, family
from profiler.runs.workloads import workload

#: RunConfig fields as a dict: a run's config, or the changes an experiment makes to it
Options: TypeAlias = dict[str, Any]


@dataclass(frozen=True)
class Experiment:
    """One change to the run's options, the rules it tests and why it should help."""

    label: str  # e.g. "--cuda-graphs", "backend ttrt_fp16", "--bs 16"
    changes: Options  # RunConfig field -> value
    rules: tuple[str, ...]
    source: str
    promise: float = 1.0  # the rule's projected speedup (x), 1 when it gives none
    cost: float = 1.0
    #: what the promise is: "bound" or "estimate" (profiler.analysis.advice.Projection)
    promise_kind: ProjectionKind | None = None

    @property
    def slug(self) -> str:
        """A folder name for the experiment's run."""
        parts = []
        for key, value in sorted(self.changes.items()):
            if value is True:
                parts.append(key)
            else:
                parts.append(f"{key}-{value}")
        return "_".join(parts).replace("/", "-") or "baseline"


@dataclass
class Plan:
    """The ranked experiments, and the rules that fired with none (and why)."""

    experiments: list[Experiment]
    without: dict[str, str] = field(default_factory=dict)


def _backend(family_name: str, precision: str) -> str | None:
    """The registered backend of that family and precision, or None."""
    name = f"{family(family_name).prefix}{precision}"
    return name if name in BACKENDS else None


def _switch(config: Options, family_name: str, precision: str | None = None) -> list[Options]:
    spec = BACKENDS.get(config["backend"])
    name = _backend(family_name, precision or (spec.precision if spec else "fp32"))
    return [{"backend": name}] if name and name != config["backend"] else []


def _launch_bound(config: Options) -> list[tuple[str, Options, str]]:
    spec = BACKENDS[config["backend"]]
    out = []
    if (
        workload(config.get("workload", "forward")).not_captured is None
        and family(spec.family).tries_cuda_graphs
        and not config.get("cuda_graphs")
    ):
        out.append(
            (
                "--cuda-graphs",
                {"cuda_graphs": True},
                "CUDA graphs replay every launch at once (PyTorch docs, torch.cuda.graphs)",
            )
        )
    for changes in _switch(config, "inductor"):
        out.append(
            (
                f"backend {changes['backend']}",
                changes,
                "torch.compile fuses kernels: fewer launches (PyTorch 2 paper, TorchInductor)",
            )
        )
    for changes in _switch(config, "tensorrt"):
        out.append(
            (
                f"backend {changes['backend']}",
                changes,
                "TensorRT fuses layers into few kernels (trtexec suggests --useCudaGraph "
                "for launch-bound engines)",
            )
        )
    return out


def _fp32_cuda_cores(config: Options) -> list[tuple[str, Options, str]]:
    spec = BACKENDS[config["backend"]]
    out = []
    if not config.get("tf32"):
        out.append(
            (
                "--tf32",
                {"tf32": True},
                "TF32 runs FP32 matmul/conv on Tensor Cores (NVIDIA Ampere whitepaper; "
                "torch.backends.cuda.matmul.allow_tf32)",
            )
        )
    for precision in ("bf16", "fp16"):
        for changes in _switch(config, spec.family, precision):
            out.append(
                (
                    f"backend {changes['backend']}",
                    changes,
                    "half precision runs GEMM/conv on Tensor Cores (NVIDIA mixed-precision "
                    "training guide)",
                )
            )
    return out


def _bigger_batches(config: Options) -> list[tuple[str, Options, str]]:
    bs = int(config["batch_size"])
    why = (
        "more work per call spreads each call's fixed cost over more samples (throughput "
        "per sample; the TensorBoard plugin's 'increase the batch size')"
    )
    return [(f"--bs {n}", {"batch_size": n}, why) for n in (2 * bs, 4 * bs)]


def _memory_bound(config: Options) -> list[tuple[str, Options, str]]:
    spec = BACKENDS[config["backend"]]
    out = []
    if spec.precision == "fp32":
        for changes in _switch(config, spec.family, "fp16"):
            out.append(
                (
                    f"backend {changes['backend']}",
                    changes,
                    "half precision halves the bytes moved (roofline: Williams et al. 2009)",
                )
            )
    if (
        config.get("memory_format", "auto") != "channels_last"
        and family(spec.family).tries_channels_last
    ):
        out.append(
            (
                "--memory-format channels_last",
                {"memory_format": "channels_last"},
                "NHWC lets cuDNN pick kernels without layout transposes (PyTorch "
                "channels_last tutorial)",
            )
        )
    for changes in _switch(config, "inductor"):
        out.append(
            (
                f"backend {changes['backend']}",
                changes,
                "fusing elementwise work removes round trips to memory (TorchInductor)",
            )
        )
    return out


#: the built-in conv nets, whose inputs channels-last changes (profiler.collect.models'
#: CONV_MODELS; tests/test_advise.py checks that the two agree)
CONV_MODELS = frozenset({"resnet50", "resnet18"})


def _cpu_backends(config: Options) -> list[tuple[str, Options, str]]:
    """A CPU run's compilers (TorchScript, Inductor) and, for a conv net on a backend that
    places tensors in the asked layout, channels-last."""
    spec = BACKENDS[config["backend"]]
    out = []
    for name, why in (
        ("torchscript", "TorchScript freezes the model and fuses conv/linear with oneDNN"),
        ("inductor", "torch.compile generates fused C++/OpenMP code for the CPU"),
    ):
        for changes in _switch(config, name, "fp32" if name == "torchscript" else None):
            out.append((f"backend {changes['backend']}", changes, f"{why} ({CPU_GUIDE})"))
    if (
        config.get("model") in CONV_MODELS
        and config.get("memory_format", "auto") != "channels_last"
        and family(spec.family).tries_channels_last
    ):
        out.append(
            (
                "--memory-format channels_last",
                {"memory_format": "channels_last"},
                f"oneDNN's convolutions run NHWC without reorders ({CPU_GUIDE})",
            )
        )
    return out


def _cpu_bf16(config: Options) -> list[tuple[str, Options, str]]:
    spec = BACKENDS[config["backend"]]
    return [
        (
            f"backend {changes['backend']}",
            changes,
            f"BF16 matmul/conv on AVX-512 BF16 or AMX units ({CPU_GUIDE})",
        )
        for changes in _switch(config, spec.family, "bf16")
    ]


#: rule id -> what makes its experiments from the run's config (RunConfig fields as a dict)
EXPERIMENTS = {
    "launch-bound": _launch_bound,
    "fp32-cuda-cores": _fp32_cuda_cores,
    "batch-headroom": _bigger_batches,
    "low-occupancy": _bigger_batches,
    "memory-bound": _memory_bound,
    "cpu-backends": _cpu_backends,
    "cpu-bf16": _cpu_bf16,
}
#: rules no option change tests, and why
NO_EXPERIMENT = {
    "trt-fp32-layers": "the fix is per layer (mark the layers' precision in the engine), not a "
    "run option",
    "cpu-threads": "the thread count is no run option: set OMP_NUM_THREADS in the environment "
    "of a run",
}


#: bytes per element of each precision (the memory-bound bound scales with the bytes moved)
BYTES = {"fp32": 4, "tf32": 4, "fp16": 2, "bf16": 2, "fp8": 1, "int8": 1}


def _precision(changes: Options | None, config: Options | None) -> str | None:
    """The precision an experiment runs at (its backend's), None when it keeps the run's."""
    backend = (changes or {}).get("backend")
    spec = BACKENDS.get(backend) if backend else None
    if changes and changes.get("tf32"):
        return "tf32"
    return spec.precision if spec else None


def promise(advice: Advice, changes: Options | None = None, config: Options | None = None) -> float:
    """The rule's projected speedup as a factor (1 when the rule gives no number), for the
    experiment ``changes`` where the rule's formula depends on it (profiler.analysis.advice
    writes each formula beside its rule):
    - fp32-cuda-cores: Amdahl with the GEMM/conv share at the datasheet's dense ratio of the
      precision tried (--tf32: TF32:FP32, else FP16:FP32);
    - memory-bound: the bound times the bytes ratio when the experiment's precision has fewer
      bytes per element than the run's (FP32 to FP16: twice)."""
    f = advice.figures
    value = f.get("projected_speedup")
    if not value:
        return 1.0
    if (
        advice.rule == "fp32-cuda-cores"
        and _precision(changes, config) == "tf32"
        and f.get("dense_ratio_tf32")
    ):
        m = float(f["matrix_share"])
        return 1 / ((1 - m) + m / float(f["dense_ratio_tf32"]))
    if advice.rule == "memory-bound" and changes:
        run = BACKENDS.get((config or {}).get("backend", ""))
        now, then = (
            BYTES.get(run.precision if run else ""),
            BYTES.get(_precision(changes, config) or ""),
        )
        if now and then and then < now:
            return float(value) * now / then
    return float(value)


def cost(changes: Options, config: Options) -> float:
    backend = changes["backend"] if "backend" in changes else config["backend"]
    spec = BACKENDS.get(backend)
    base = family(spec.family).setup_cost if spec else 1.0
    if "batch_size" in changes:
        base *= changes["batch_size"] / max(1, int(config["batch_size"]))
    return base


def plan(advice: list[Advice], config: Options) -> Plan:
    """The experiments of the rules that fired, deduplicated, most promising per cost first."""
    found: dict[tuple[tuple[str, Any], ...], Experiment] = {}
    without: dict[str, str] = {}
    for a in advice:
        make = EXPERIMENTS.get(a.rule)
        if make is None:
            without[a.rule] = NO_EXPERIMENT.get(a.rule, "no run option tests it")
            continue
        made = make(config)
        if not made:
            without[a.rule] = "every change it would try is what the run already does"
        for label, changes, source in made:
            key = tuple(sorted(changes.items()))
            old = found.get(key)
            rules = (old.rules if old else ()) + (a.rule,)
            mine = promise(a, changes, config)
            best, kind = (
                (mine, a.projection)
                if mine > (old.promise if old else 1.0)
                else ((old.promise, old.promise_kind) if old else (1.0, None))
            )
            found[key] = Experiment(
                label,
                changes,
                rules,
                old.source if old else source,
                best,
                cost(changes, config),
                kind,
            )
    ranked = sorted(
        found.values(), key=lambda e: (-math.log(max(e.promise, 1.0)) / e.cost, e.cost, e.label)
    )
    return Plan(ranked, without)


def projection(
    advice: list[Advice], rules: Collection[str], changes: Options, config: Options | None = None
) -> tuple[float | None, ProjectionKind | None]:
    """The largest projection the rules of an experiment give it, with its kind ("bound",
    "estimate"); (None, None) when none gives a number."""
    best, kind = None, None
    for a in advice:
        if a.rule in rules:
            value = promise(a, changes, config)
            if value > 1 and (best is None or value > best):
                best, kind = value, a.projection
    return best, kind
