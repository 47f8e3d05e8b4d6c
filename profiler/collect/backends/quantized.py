"""8-bit backends: INT8 through torchao + Inductor, INT8 and FP8 through ModelOpt + Torch-TensorRT.

``inductor_int8`` quantizes Linear layers with torchao (INT8 weights per output channel, INT8
activations) and compiles with Inductor, whose INT8 GEMMs are ``torch._int_mm`` (cuBLASLt IMMA or
a Triton template). Activations are scaled dynamically (per token, at run time) unless
calibration is asked for: ``--calib-batches N`` random batches or ``--calib-data PATH`` give each
layer one static per-tensor activation scale (max |x| / 127 seen over the batches).
``torch._int_mm`` needs more than 16 rows and multiples of 8 for K and N: a Linear whose
activation has 16 rows or fewer (DistilBERT's classifier head at batch 12 has 12) or other sizes
stays in floating point, and the notes say which and why, with the share of the Linear and of
all GEMM/conv FLOPs that run in INT8. Convolutions are never quantized here.

``ttrt_int8`` / ``ttrt_fp8`` quantize with NVIDIA ModelOpt (``mtq.INT8_DEFAULT_CFG`` /
``mtq.FP8_DEFAULT_CFG``, Q/DQ calibrated on the same batches), export under ModelOpt's
``export_torch_mode()`` and build a strongly typed Torch-TensorRT engine. TensorRT-RTX does not
support INT8 activations, so ``ttrt_int8`` needs the full TensorRT; FP8 needs compute capability
8.9 or newer.
"""

from __future__ import annotations

import dataclasses
import pickle
import time
import zipfile
from functools import partial
from pathlib import Path
from typing import Literal

from profiler import units
from profiler.collect.backends.base import Prepared, implement, module_missing
from profiler.collect.backends.eager import place
from profiler.errors import UserError, first_line

CALIBRATION_LOG = "calibration.log"
# the constraints of torch._int_mm on CUDA (aten/src/ATen/native/cuda/Blas.cpp)
INT_MM_MIN_ROWS = 17
INT_MM_MULTIPLE = 8
MODELOPT_DEFAULT_CALIB_BATCHES = 8
FP8_MIN_CAPABILITY = (8, 9)
RTX_INT8_REFUSAL = (
    "TensorRT-RTX does not support int8 activation quantization (only int8 "
    'weights); ttrt_int8 needs the full TensorRT: pip install -e ".[tensorrt]" '
    "--extra-index-url https://pypi.nvidia.com"
)


# ---------------------------------------------------------------------------------------------
# calibration batches


def _describe(tensor) -> str:
    return f"{list(tensor.shape)} {str(tensor.dtype).replace('torch.', '')}"


def _load_tensors(path: Path, what: str):
    """What the tensor file holds (torch.load, weights only); a file it cannot read is one
    line."""
    import torch

    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise UserError(f"{what}: no such file") from None
    except (
        pickle.UnpicklingError,
        RuntimeError,
        EOFError,
        zipfile.BadZipFile,
        ValueError,
        AttributeError,
        IsADirectoryError,
    ) as error:
        first = first_line(error) or type(error).__name__
        raise UserError(
            f"{what} is not a tensor file torch.load(weights_only=True) reads ({first[:160]})"
        ) from None


def load_calibration_data(path: Path, inputs: tuple) -> list[tuple]:
    """Batches from a tensor file: a tensor (models with one input) or a tuple/list of tensors,
    one per model input, each shaped like the input ([batch, ...], one batch) or with a leading
    count ([N, batch, ...], N batches), with the input's kind of dtype (floating or integer).
    Anything else is one line."""
    import torch

    what = f"--calib-data {path}"
    data = _load_tensors(path, what)
    tensors = (
        [data]
        if isinstance(data, torch.Tensor)
        else list(data)
        if isinstance(data, (tuple, list))
        else None
    )
    if tensors is None or not all(isinstance(t, torch.Tensor) for t in tensors):
        raise UserError(
            f"{what} holds a {type(data).__name__}, not a tensor or a tuple of "
            "tensors (one per model input)"
        )
    if len(tensors) != len(inputs):
        raise UserError(
            f"{what} holds {len(tensors)} tensor(s); the model takes {len(inputs)} "
            f"input(s): {', '.join(_describe(t) for t in inputs)}"
        )
    counts: list[int | None] = []
    for index, (data_tensor, example) in enumerate(zip(tensors, inputs)):
        if data_tensor.is_floating_point() != example.is_floating_point():
            raise UserError(
                f"{what}: tensor {index} is {_describe(data_tensor)}; the model's "
                f"input {index} is {_describe(example)} (dtype kind differs)"
            )
        if tuple(data_tensor.shape) == tuple(example.shape):
            counts.append(None)
        elif tuple(data_tensor.shape[1:]) == tuple(example.shape):
            counts.append(data_tensor.shape[0])
        else:
            raise UserError(
                f"{what}: tensor {index} is {_describe(data_tensor)}; expected "
                f"{list(example.shape)} or [N, {', '.join(map(str, example.shape))}]"
            )
    if len({c for c in counts}) > 1:
        raise UserError(f"{what}: the tensors hold different numbers of batches ({counts})")
    if counts[0] is None:
        return [tuple(t.to(e.dtype) for t, e in zip(tensors, inputs))]
    return [tuple(t[i].to(e.dtype) for t, e in zip(tensors, inputs)) for i in range(counts[0])]


def random_batches(inputs: tuple, count: int, seed: int) -> list[tuple]:
    """``count`` batches like ``inputs``: floating inputs drawn from N(0, 1), integer inputs
    (token ids, masks) uniformly within the range the example input spans."""
    import torch

    generator = torch.Generator().manual_seed(seed + 1)
    batches = []
    for _ in range(count):
        batch = []
        for example in inputs:
            if example.is_floating_point():
                batch.append(torch.randn(example.shape, generator=generator).to(example.dtype))
            else:
                low, high = int(example.min()), int(example.max()) + 1
                batch.append(
                    torch.randint(
                        low, high, example.shape, generator=generator, dtype=example.dtype
                    )
                )
        batches.append(tuple(batch))
    return batches


def calibration_batches(config, inputs: tuple, default_count: int) -> tuple[list[tuple], str]:
    """The calibration batches on the inputs' device, and where they came from."""
    if config.calib_data is not None:
        batches, source = (
            load_calibration_data(Path(config.calib_data), inputs),
            f"{config.calib_data}",
        )
    else:
        count = config.calib_batches or default_count
        batches, source = random_batches(inputs, count, config.seed), f"{count} random batches"
    device = inputs[0].device
    return [tuple(t.to(device) for t in batch) for batch in batches], source


# ---------------------------------------------------------------------------------------------
# which Linear layers can run INT8, and what share of the FLOPs that is


@dataclasses.dataclass
class LayerShape:
    kind: str  # "linear" or "conv"
    rows: int = 0  # rows of the flattened activation (batch x tokens) for a Linear
    in_features: int = 0
    out_features: int = 0
    flops: int = 0
    input_ndim: int = 2
    amax: float = 0.0  # max |input| seen (calibration)


def observe_layers(model, batches: list[tuple]) -> dict[str, LayerShape]:
    """Run ``batches`` through the model with hooks on every Linear and Conv: the activation
    shapes (hence rows and FLOPs) and the largest |input| each Linear saw."""
    import torch

    seen: dict[str, LayerShape] = {}
    hooks = []

    def linear_hook(name):
        def hook(module, args, output):
            x = args[0]
            shape = seen.setdefault(name, LayerShape("linear"))
            shape.rows = x.numel() // x.shape[-1]
            shape.in_features, shape.out_features = module.in_features, module.out_features
            shape.flops = 2 * shape.rows * module.in_features * module.out_features
            shape.input_ndim = x.dim()
            shape.amax = max(shape.amax, float(x.detach().abs().max()))

        return hook

    def conv_hook(name):
        def hook(module, args, output):
            kernel = 1
            for size in module.kernel_size:
                kernel *= size
            flops = 2 * output.numel() * (module.in_channels // module.groups) * kernel
            seen[name] = LayerShape("conv", flops=flops)

        return hook

    for name, module in model.named_modules():
        if isinstance(module, torch.nn.Linear):
            hooks.append(module.register_forward_hook(linear_hook(name)))
        elif isinstance(module, torch.nn.modules.conv._ConvNd):
            hooks.append(module.register_forward_hook(conv_hook(name)))
    try:
        with torch.no_grad():
            for batch in batches:
                model(*batch)
    finally:
        for hook in hooks:
            hook.remove()
    return seen


def int8_skip_reason(shape: LayerShape) -> str | None:
    """Why torch._int_mm cannot run this Linear, or None when it can."""
    if shape.rows < INT_MM_MIN_ROWS:
        return f"{shape.rows} rows: torch._int_mm needs more than {INT_MM_MIN_ROWS - 1}"
    for label, size in (("in_features", shape.in_features), ("out_features", shape.out_features)):
        if size % INT_MM_MULTIPLE:
            return f"{label} {size}: torch._int_mm needs a multiple of {INT_MM_MULTIPLE}"
    return None


def int8_plan(layers: dict[str, LayerShape]) -> dict:
    """Which Linears go INT8, why the others do not, and the FLOP shares."""
    chosen, skipped = [], {}
    for name, shape in layers.items():
        if shape.kind != "linear":
            continue
        reason = int8_skip_reason(shape)
        if reason:
            skipped[name] = reason
        else:
            chosen.append(name)
    linear = sum(s.flops for s in layers.values() if s.kind == "linear")
    total = sum(s.flops for s in layers.values())
    int8 = sum(layers[n].flops for n in chosen)
    conv = total - linear
    return {
        "int8_layers": chosen,
        "fp_layers": skipped,
        "int8_linear_flop_share": int8 / linear if linear else None,
        "int8_flop_share": int8 / total if total else None,
        "conv_flop_share": conv / total if total else None,
    }


# ---------------------------------------------------------------------------------------------
# inductor_int8


def quantize_with_torchao(
    model, layers: dict[str, LayerShape], chosen: list[str], static: bool
) -> str:
    """Quantize the chosen Linears in place; returns the scheme applied."""
    import torch
    from torchao.quantization import (
        Int8DynamicActivationInt8WeightConfig,
        Int8StaticActivationInt8WeightConfig,
        quantize_,
    )
    from torchao.quantization.granularity import PerRow, PerTensor

    if not static:
        names = set(chosen)
        quantize_(
            model,
            Int8DynamicActivationInt8WeightConfig(),
            filter_fn=lambda module, fqn: fqn in names,
        )
        return "dynamic per-token INT8 activations, per-channel INT8 weights"
    for name in chosen:
        shape = layers[name]
        scale = torch.tensor(
            max(shape.amax, 1e-12) / 127.0,
            dtype=torch.float32,
            device=next(model.get_submodule(name).parameters()).device,
        )
        config = Int8StaticActivationInt8WeightConfig(
            act_quant_scale=scale.reshape((1,) * shape.input_ndim),
            granularity=[PerTensor(), PerRow()],
        )
        quantize_(model, config, filter_fn=lambda module, fqn, target=name: fqn == target)
    return "static per-tensor INT8 activations (calibrated max |x| / 127), per-channel INT8 weights"


def _prepare_inductor_int8(model, inputs, config, device) -> Prepared:
    import torch

    # the layers left in floating point run in BF16 on a GPU (torchao's usual base), FP32 on CPU
    base = "bf16" if device.type == "cuda" else "fp32"
    model, inputs, notes = place(model, inputs, config, device, base)
    static = config.calib_batches > 0 or config.calib_data is not None
    with CalibrationLog(config) as log:
        began = time.perf_counter()
        batches, source = (
            calibration_batches(config, inputs, 1)
            if static
            else ([inputs], "the example inputs (shapes only)")
        )
        layers = observe_layers(model, batches)
        calibration_s = time.perf_counter() - began
        plan = int8_plan(layers)
        began = time.perf_counter()
        scheme = (
            quantize_with_torchao(model, layers, plan["int8_layers"], static)
            if plan["int8_layers"]
            else "none: no Linear layer fits torch._int_mm"
        )
        log.write(f"calibration on {source}; {len(plan['int8_layers'])} Linear layer(s) INT8\n")
    notes.update(
        {
            "base_dtype": notes.pop("dtype"),
            "int8_scheme": scheme,
            "calibration": source if static else "none (dynamic scales)",
            "calibration_s": calibration_s if static else 0.0,
            "quantize_s": time.perf_counter() - began,
            **plan,
            "int8_share": _share_text(plan),
            "compile_mode": config.compile_mode,
            "warnings": [],
        }
    )
    if not plan["int8_layers"]:
        notes["warnings"].append("no layer runs in INT8 (" + _share_text(plan) + ")")
    compiled = torch.compile(model, mode=config.compile_mode, backend="inductor")

    def forward(*args):
        with torch.inference_mode():
            return compiled(*args)

    return Prepared(fn=forward, inputs=inputs, notes=notes)


def _share_text(plan: dict) -> str:
    total = plan["int8_flop_share"]
    if total is None:
        return "no Linear or conv FLOPs seen"
    conv = plan["conv_flop_share"] or 0.0
    return (
        f"{units.percent(100 * total)} of the Linear+conv FLOPs in INT8 "
        f"({units.percent(100 * conv)} are convolutions, kept in floating point)"
    )


class CalibrationLog:
    """Collects calibration messages; on failure the log and the exception go to
    runs/<run>.failed/calibration.log and the error becomes one line."""

    def __init__(self, config) -> None:
        import io

        self.config = config
        self.buffer = io.StringIO()

    def __enter__(self):
        return self.buffer

    def __exit__(self, kind, error, tb) -> Literal[False]:
        if error is None or isinstance(error, UserError) or not isinstance(error, Exception):
            return False
        if "out of memory" in str(error).lower():
            return False
        from profiler.collect.backends.tensorrt import save_failed_build

        path = save_failed_build(
            self.config, self.buffer.getvalue(), error, log_name=CALIBRATION_LOG
        )
        first = first_line(error)
        raise UserError(
            f"calibration/quantization failed for {self.config.model} "
            f"{self.config.backend} ({type(error).__name__}: {first[:200]}); log in "
            f"{path}"
        ) from None


# ---------------------------------------------------------------------------------------------
# ttrt_int8, ttrt_fp8 (ModelOpt PTQ -> Torch-TensorRT)


def fp8_refusal(capability: tuple[int, int], gpu: str) -> str | None:
    if tuple(capability) < FP8_MIN_CAPABILITY:
        return (
            f"ttrt_fp8 needs FP8 Tensor Cores (compute capability 8.9 or newer); {gpu} is "
            f"{capability[0]}.{capability[1]}"
        )
    return None


def _modelopt_missing(precision: str):
    def check() -> str | None:
        from profiler.collect.backends.tensorrt import detect_flavour, missing_reason

        reason = module_missing("modelopt", "fp8")() or missing_reason()
        if reason:
            return reason
        if precision == "int8" and detect_flavour().name == "tensorrt-rtx":
            return RTX_INT8_REFUSAL
        return None

    return check


def modelopt_quantize_and_compile(
    model, inputs, batches, config, precision: str, mtq, export_torch_mode, torch_tensorrt
) -> tuple[object, dict]:
    """PTQ with ModelOpt on ``batches``, export, strongly typed TensorRT build. The libraries are
    passed in (tests stand in for them on the CPU). Returns (compiled module, timing notes)."""
    import torch

    quant_config = {"int8": mtq.INT8_DEFAULT_CFG, "fp8": mtq.FP8_DEFAULT_CFG}[precision]

    def forward_loop(module) -> None:
        for batch in batches:
            module(*batch)

    began = time.perf_counter()
    with torch.no_grad():
        model = mtq.quantize(model, quant_config, forward_loop)
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    calibration_s = time.perf_counter() - began
    began = time.perf_counter()
    with torch.no_grad(), export_torch_mode():
        exported = torch.export.export(model, tuple(inputs), strict=False)
        compiled = torch_tensorrt.dynamo.compile(
            exported,
            inputs=list(inputs),
            use_explicit_typing=True,
            min_block_size=1,
            disable_tf32=not config.tf32,
        )
    compile_s = time.perf_counter() - began
    with torch.no_grad():
        check = engine_check(compiled(*inputs), model(*inputs))
    return compiled, {
        "calibration_s": calibration_s,
        "compile_s": compile_s,
        "quant_config": f"mtq.{precision.upper()}_DEFAULT_CFG",
        "engine_check": check,
    }


def _first_tensor(output):
    if isinstance(output, (tuple, list)):
        return _first_tensor(output[0]) if output else None
    return output if hasattr(output, "isfinite") else getattr(output, "logits", None)


def engine_check(engine_output, fake_quant_output) -> dict:
    """The engine's output against ModelOpt's fake-quantized model in PyTorch on the same input:
    where a non-finite output comes from. Both non-finite: the calibration or its scales; only
    the engine's: the engine (on an H100, TensorRT-RTX 1.4 gave NaN for every ResNet50 output
    with FP8 weights and activations, while the fake-quantized model was finite;
    docs/gpu/h100/fp8/README.md)."""
    import torch

    engine, fake = _first_tensor(engine_output), _first_tensor(fake_quant_output)
    if engine is None or fake is None:
        return {}
    engine, fake = engine.detach().float(), fake.detach().float()
    check = {
        "outputs": engine.numel(),
        "engine_non_finite": int((~torch.isfinite(engine)).sum()),
        "fake_quant_non_finite": int((~torch.isfinite(fake)).sum()),
    }
    if not check["engine_non_finite"] and not check["fake_quant_non_finite"]:
        norm = float(torch.linalg.vector_norm(fake))
        check["engine_vs_fake_quant_rel_l2"] = (
            float(torch.linalg.vector_norm(engine - fake)) / norm if norm else None
        )
    return check


def engine_warning(check: dict, backend: str) -> str | None:
    """One line when the check found non-finite outputs, naming which side made them."""
    bad, fake_bad, n = (
        check.get("engine_non_finite"),
        check.get("fake_quant_non_finite"),
        check.get("outputs"),
    )
    if fake_bad:
        return (
            f"{backend}: ModelOpt's fake-quantized model in PyTorch already gives {fake_bad} "
            f"non-finite outputs of {n} on the example input: the calibration or its scales "
            "are at fault, not the engine"
        )
    if bad:
        return (
            f"{backend}: the TensorRT engine gives {bad} non-finite outputs of {n} on the "
            "example input, where ModelOpt's fake-quantized model in PyTorch gives finite "
            "ones: the engine is at fault, not the calibration (TensorRT-RTX 1.4 did this "
            "with FP8 weights and activations in convolutions on an H100)"
        )
    return None


def build_extensions() -> None:
    """Build (or load) ModelOpt's CUDA extensions now, so that the first-use compile is counted
    with the compile time and not with the calibration; versions without these entry points
    build them during calibration instead."""
    try:
        from modelopt.torch.quantization import extensions
    except ImportError:
        return
    for name in ("get_cuda_ext", "get_cuda_ext_fp8"):
        getter = getattr(extensions, name, None)
        if getter is not None:
            getter()


def _refuse_precision(precision: str, flavour, device) -> None:
    """Refuse, in one line, INT8 on TensorRT-RTX and FP8 on a GPU without it."""
    import torch

    if precision == "int8" and flavour.name == "tensorrt-rtx":
        raise UserError(RTX_INT8_REFUSAL)
    if precision == "fp8":
        refusal = fp8_refusal(
            torch.cuda.get_device_capability(device), torch.cuda.get_device_name(device)
        )
        if refusal:
            raise UserError(refusal)


def _prepare_modelopt(model, inputs, config, device, precision: str) -> Prepared:
    import torch

    from profiler.collect.backends.tensorrt import (
        captured_build_log,
        detect_flavour,
        save_failed_build,
    )

    flavour = detect_flavour()
    _refuse_precision(precision, flavour, device)
    if config.memory_format == "auto":
        config = dataclasses.replace(config, memory_format="contiguous")
    # ModelOpt's CUDA extensions are built on first use (about a minute): that is compile time
    began = time.perf_counter()
    import modelopt.torch.quantization as mtq
    import torch_tensorrt
    from modelopt.torch.quantization.utils import export_torch_mode

    build_extensions()
    import_s = time.perf_counter() - began
    model, inputs, notes = place(model, inputs, config, device, "fp16")
    batches, source = calibration_batches(config, inputs, MODELOPT_DEFAULT_CALIB_BATCHES)
    with captured_build_log() as log:
        try:
            compiled, timing = modelopt_quantize_and_compile(
                model, inputs, batches, config, precision, mtq, export_torch_mode, torch_tensorrt
            )
        except Exception as error:
            if "out of memory" in str(error).lower():
                raise
            path = save_failed_build(config, log.getvalue(), error)
            first = first_line(error)
            raise UserError(
                f"ModelOpt PTQ or TensorRT build failed for {config.model} "
                f"ttrt_{precision} ({type(error).__name__}: {first[:200]}); log in "
                f"{path}"
            ) from None
    torch.cuda.synchronize()
    warning = engine_warning(timing.get("engine_check") or {}, f"ttrt_{precision}")
    notes.update(
        {
            "base_dtype": notes.pop("dtype"),
            "flavour": flavour.name,
            "calibration": source,
            **timing,
            "modelopt_import_s": import_s,
            "artifacts": {"tensorrt_build.log": log.getvalue()},
            "warnings": [warning] if warning else [],
        }
    )
    notes["compile_s"] += import_s

    def forward(*args):
        with torch.inference_mode():
            return compiled(*args)

    return Prepared(fn=forward, inputs=inputs, notes=notes)


implement("inductor_int8", _prepare_inductor_int8, missing=module_missing("torchao", "int8"))
for _precision in ("int8", "fp8"):
    implement(
        f"ttrt_{_precision}",
        partial(_prepare_modelopt, precision=_precision),
        missing=_modelopt_missing(_precision),
    )
