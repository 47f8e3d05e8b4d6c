"""Torch-TensorRT (``torch_tensorrt.compile(..., ir="dynamo")``) in FP32 and FP16.

Two distributions provide the ``torch_tensorrt`` module: ``torch-tensorrt`` on the full TensorRT
(library module ``tensorrt``, from NVIDIA's package index) and ``torch-tensorrt-rtx`` on
TensorRT-RTX (library module ``tensorrt_rtx``, on PyPI). Which one is installed is read from the
installed distributions, the same way torch_tensorrt itself chooses its library.

Both build strongly typed engines (``use_explicit_typing=True``): FP16 means a half-precision model
and inputs, not a builder flag (TensorRT-RTX has no FP16 flag, and Torch-TensorRT 2.13 dropped
weak typing). TF32 follows ``--tf32`` through ``disable_tf32``.

Compiled modules are kept in the engine cache (profiler/collect/engine_cache.py) as ExportedPrograms
(``torch_tensorrt.save`` / ``torch_tensorrt.load``). The layer view (engine inspector JSON, and
per-layer times from the engine profiler) lands in the run folder as artifacts. What describes an
engine (its inspector JSON, device memory) is read once, at build, and kept in the cache entry's
report, so a cache hit neither inspects nor deserializes the engines again.
"""

from __future__ import annotations

import contextlib
import dataclasses
import glob
import importlib
import importlib.metadata
import importlib.util
import io
import json
import logging
import re
import shutil
import tempfile
import time
import traceback
from functools import partial
from pathlib import Path
from typing import Any

from profiler.collect import engine_cache
from profiler.collect.backends.base import Prepared, implement
from profiler.collect.backends.eager import place
from profiler.errors import OutOfMemory, UserError, first_line
from profiler.fsutil import write_text_atomic

# flavour -> (distribution, library module)
FLAVOURS = {
    "tensorrt": ("torch-tensorrt", "tensorrt"),
    "tensorrt-rtx": ("torch-tensorrt-rtx", "tensorrt_rtx"),
}
INSTALL_HINT = (
    'install one of: pip install -e ".[tensorrt]" --extra-index-url '
    'https://pypi.nvidia.com (full TensorRT), or pip install -e ".[tensorrt-rtx]" '
    "(TensorRT-RTX)"
)
# Torch-TensorRT's own loggers: the compiler's, and the one TensorRT's builder messages go to
# (its name has no dot, so it is not a child of "torch_tensorrt")
BUILD_LOGGERS = ("torch_tensorrt", "torch_tensorrt [TensorRT Conversion Context]")
BUILD_LOG = "tensorrt_build.log"
LOG_TAIL_LINES = 200
# what is compiled: part of the cache key and recorded in the notes
COMPILE_OPTIONS = {"ir": "dynamo", "use_explicit_typing": True, "min_block_size": 5}
# per-layer averages over this many profiled runs: each costs far more than a timed one (about
# 95 ms on ResNet50 at batch size 8) because the engine profiler synchronizes after every layer
LAYER_TIMING_ITERS = 10


@dataclasses.dataclass(frozen=True)
class Flavour:
    name: str  # "tensorrt" or "tensorrt-rtx"
    distribution: str
    version: str
    library_module: str


def detect_flavour(
    version_of=importlib.metadata.version, find_spec=importlib.util.find_spec
) -> Flavour:
    """Which distribution provides torch_tensorrt here; raises UserError with a one-line fix.

    ``version_of`` and ``find_spec`` are importlib's, passed in so tests can stand in for them.
    """
    installed = {}
    for name, (distribution, _) in FLAVOURS.items():
        try:
            installed[name] = version_of(distribution)
        except importlib.metadata.PackageNotFoundError:
            continue
    if not installed:
        raise UserError(
            f"neither torch-tensorrt nor torch-tensorrt-rtx is installed; {INSTALL_HINT}"
        )
    if len(installed) > 1:
        both = " and ".join(f"{FLAVOURS[n][0]} {v}" for n, v in installed.items())
        raise UserError(
            f"{both} are both installed and overwrite each other's torch_tensorrt "
            "module; pip uninstall one of them"
        )
    name, version = next(iter(installed.items()))
    distribution, library = FLAVOURS[name]
    if find_spec("torch_tensorrt") is None:
        raise UserError(
            f"{distribution} {version} is registered as installed but the "
            f"torch_tensorrt module is missing; reinstall it"
        )
    if find_spec(library) is None:
        raise UserError(
            f"{distribution} {version} is installed but its library module "
            f"{library!r} is not; reinstall it or {INSTALL_HINT}"
        )
    return Flavour(name, distribution, version, library)


def _tensorrt_library():
    """The tensorrt (or tensorrt_rtx) Python package, or None."""
    for name in ("tensorrt", "tensorrt_rtx"):
        try:
            return importlib.import_module(name)
        except ImportError:
            continue
    return None


def missing_reason() -> str | None:
    """None when Torch-TensorRT can run here, else the one-line reason."""
    try:
        detect_flavour()
    except UserError as error:
        return str(error)
    return None


def library_versions(flavour: Flavour, torch_module, torch_tensorrt_module, library_module) -> dict:
    return {
        "torch": torch_module.__version__,
        "torch_tensorrt": getattr(torch_tensorrt_module, "__version__", flavour.version),
        flavour.library_module: getattr(library_module, "__version__", "unknown"),
    }


# ---------------------------------------------------------------------------------------------
# the compiled module: engines, what runs in PyTorch


def _attribute(obj, name: str):
    """getattr that also tolerates TorchScript objects, which may raise other errors."""
    try:
        return getattr(obj, name)
    except Exception:
        return None


def find_engines(graph_module) -> list[tuple[str, Any, Any]]:
    """(name, layer-info source, C++ engine or None) for every TensorRT engine in the module.

    A fresh compile holds TorchTensorRTModule (C++ runtime, ``.engine``) or
    PythonTorchTensorRTModule submodules; a module loaded from the cache holds the engines as
    ``torch.classes.tensorrt.Engine`` attributes fed to ``torch.ops.tensorrt.execute_engine``.
    """
    found = []
    for name, module in graph_module.named_modules():
        if _attribute(module, "get_layer_info") is not None:
            engine = _attribute(module, "engine")
            found.append((name, module, engine if _attribute(engine, "enable_profiling") else None))
    if found:
        return found
    for node in graph_module.graph.nodes:
        if node.op == "get_attr":
            obj = graph_module
            for part in str(node.target).split("."):
                obj = _attribute(obj, part)
            if _attribute(obj, "get_engine_layer_info") is not None:
                found.append((str(node.target), obj, obj))
    return found


def engine_device_memory(engines, tensorrt_module=None) -> dict:
    """Device memory (activations, scratch) each engine asks for at execution context creation:
    ``ICudaEngine.device_memory_size_v2`` (``device_memory_size`` before TensorRT 10) where the
    Python runtime exposes the engine; else the C++ engine's serialized bytes deserialized with
    ``tensorrt.Runtime``. Weights are not included. Records why not where neither works."""
    sizes, why_not = [], []
    for name, source, engine in engines:
        size = None
        for holder in (source, engine, _attribute(source, "engine")):
            for attr in ("device_memory_size_v2", "device_memory_size"):
                value = _attribute(holder, attr)
                if isinstance(value, int):
                    size = value
                    break
            if size is not None:
                break
        if size is None and tensorrt_module is not None:
            blob = _attribute(source, "serialized_engine")
            if isinstance(blob, (bytes, bytearray)):
                try:
                    runtime = tensorrt_module.Runtime(tensorrt_module.Logger())
                    cuda_engine = runtime.deserialize_cuda_engine(bytes(blob))
                    size = int(
                        _attribute(cuda_engine, "device_memory_size_v2")
                        or _attribute(cuda_engine, "device_memory_size")
                    )
                except Exception as error:
                    why_not.append(f"{name}: {type(error).__name__}: {error}")
        if size is None and not why_not:
            why_not.append(f"{name}: the engine exposes no device memory size")
        sizes.append(size)
    known = [s for s in sizes if s is not None]
    return {
        "engine_device_memory_bytes": sum(known) if known and len(known) == len(sizes) else None,
        "per_engine_bytes": sizes,
        "why_not": why_not or None,
    }


def layer_info(source) -> str:
    method = _attribute(source, "get_layer_info") or _attribute(source, "get_engine_layer_info")
    return method()


def fallback_ops(graph_module) -> list[str]:
    """ATen ops that run in PyTorch: those outside the TensorRT engines, in the top graph and in
    the ``_run_on_gpu_*`` submodules (no converter, or a block below min_block_size)."""
    import torch

    ops: set[str] = set()

    def visit(module) -> None:
        for node in module.graph.nodes:
            if node.op == "call_function" and isinstance(node.target, torch._ops.OpOverload):
                name = str(node.target)
                if node.target.namespace != "tensorrt" and not name.startswith(
                    ("aten._assert", "aten.sym_")
                ):
                    ops.add(name)
            elif node.op == "call_module":
                child = module.get_submodule(node.target)
                if isinstance(child, torch.fx.GraphModule):
                    visit(child)

    visit(graph_module)
    return sorted(ops)


# ---------------------------------------------------------------------------------------------
# building


# torch loggers that repeat a warning for every TensorRT engine attribute while a compiled module
# is saved or loaded (fake_class_registry) or about the cache file's suffix (export)
NOISY_LOGGERS = ("torch._library.fake_class_registry", "torch.export.pt2_archive._package")


@contextlib.contextmanager
def quiet_torch_loggers():
    saved = [(logging.getLogger(name), logging.getLogger(name).level) for name in NOISY_LOGGERS]
    for logger, _ in saved:
        logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        for logger, level in saved:
            logger.setLevel(level)


@contextlib.contextmanager
def captured_build_log():
    """Collect Torch-TensorRT's and TensorRT's messages (INFO and up) while compiling, instead of
    letting them scroll past; yields the buffer."""
    buffer = io.StringIO()
    handler = logging.StreamHandler(buffer)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    saved = []
    for name in BUILD_LOGGERS:
        logger = logging.getLogger(name)
        saved.append((logger, logger.level, logger.propagate))
        logger.setLevel(logging.INFO)
        logger.propagate = False
        logger.addHandler(handler)
    try:
        yield buffer
    finally:
        for logger, level, propagate in saved:
            logger.removeHandler(handler)
            logger.setLevel(level)
            logger.propagate = propagate


#: how TensorRT says it ran out of GPU memory: "Error Code 2: OutOfMemory (Requested size was
#: 157679616 bytes.)" (TensorRT-RTX 1.4 on an H100, written to fd 2 by its logger)
_TRT_OOM = re.compile(
    r"Error Code 2: OutOfMemory[^\n]*|[^\n]*\bout of memory\b[^\n]*", re.IGNORECASE
)


def build_out_of_memory(text: str) -> str | None:
    """The line of a failed build's messages that says TensorRT ran out of GPU memory."""
    found = _TRT_OOM.search(text)
    return found.group(0).strip() if found else None


def save_failed_build(
    config, log_text: str, error: BaseException, log_name: str = BUILD_LOG
) -> Path:
    """Write the tail of the build log beside the run folder, as runs/<run>.failed/<log_name>, so
    the normal run folder is never half-written."""
    path = config.runs_dir / f"{config.run_name}.failed" / log_name
    lines = log_text.splitlines()[-LOG_TAIL_LINES:]
    trace = "".join(traceback.format_exception(type(error), error, error.__traceback__))
    write_text_atomic(path, "\n".join(lines) + "\n\n--- exception ---\n" + trace)
    return path


def _detailed_profiling(torch_tensorrt, workdir: str):
    """Torch-TensorRT's Debugger with save_engine_profile builds engines with DETAILED profiling
    verbosity (LAYER_NAMES_ONLY otherwise). It needs the C++ runtime; it also switches engine
    profiling on, which compile() undoes right after. Returns (context, note)."""
    debugger = _attribute(_attribute(torch_tensorrt, "dynamo"), "Debugger")
    features = _attribute(torch_tensorrt, "ENABLED_FEATURES")
    if debugger is None:
        return contextlib.nullcontext(), "LAYER_NAMES_ONLY (no torch_tensorrt.dynamo.Debugger)"
    if not _attribute(features, "torch_tensorrt_runtime"):
        return contextlib.nullcontext(), "LAYER_NAMES_ONLY (no C++ runtime for the Debugger)"
    return (
        debugger(
            log_level="error",
            save_engine_profile=True,
            profile_format="trex",
            engine_builder_monitor=False,
            logging_dir=workdir,
        ),
        "DETAILED",
    )


def compile_module(torch_tensorrt, model, inputs, config, workdir: str):
    """torch_tensorrt.compile with the options of this backend; returns (module, notes)."""
    debugger, verbosity = _detailed_profiling(torch_tensorrt, workdir)
    with debugger:
        compiled = torch_tensorrt.compile(
            model,
            ir=COMPILE_OPTIONS["ir"],
            inputs=list(inputs),
            use_explicit_typing=COMPILE_OPTIONS["use_explicit_typing"],
            min_block_size=COMPILE_OPTIONS["min_block_size"],
            disable_tf32=not config.tf32,
        )
    for _, _, engine in find_engines(compiled):
        if engine is not None:
            engine.disable_profiling()  # switched on by the Debugger; must not run while timed
    return compiled, {"profiling_verbosity": verbosity}


# ---------------------------------------------------------------------------------------------
# per-layer timing, after the timed and profiled windows


def layer_timing(compiled, inputs, workdir: Path, iters: int = LAYER_TIMING_ITERS) -> dict:
    """Run ``iters`` calls with the engine profiler on, then off again. The C++ runtime writes
    each engine's per-layer totals and averages (TREX format) as
    ``<engine>_engine_execution_profile.trace`` into the engine's profile_path_prefix."""
    import torch

    engines = [(name, engine) for name, _, engine in find_engines(compiled) if engine is not None]
    if not engines:
        return {"layer_timing": "not available: no C++-runtime engines (Python runtime)"}
    for index, (_, engine) in enumerate(engines):
        folder = workdir / f"engine_{index}"
        folder.mkdir(parents=True, exist_ok=True)
        engine.profile_path_prefix = str(folder)
        engine.enable_profiling()
        engine.set_profile_format("trex")
    try:
        with torch.inference_mode():
            for _ in range(iters):
                compiled(*inputs)
        torch.cuda.synchronize()
    finally:
        for _, engine in engines:
            engine.disable_profiling()
    artifacts = {}
    for index in range(len(engines)):
        traces = glob.glob(str(workdir / f"engine_{index}" / "*_engine_execution_profile.trace"))
        if traces:
            text = Path(traces[0]).read_text(encoding="utf-8")
            json.loads(text)  # a broken file is a bug to see, not an artifact to keep
            artifacts[f"engine_layer_times_{index}.json"] = text
    return {
        "layer_timing": {
            "iterations": iters,
            "format": "trex (timeMs total, averageMs, percentage per layer)",
            "files": sorted(artifacts),
        },
        "artifacts": artifacts,
    }


# ---------------------------------------------------------------------------------------------
# the backend


def _gpu_facts(torch) -> tuple[str, str]:
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    return props.name, f"{props.major}.{props.minor}"


def environment_facts(torch, torch_tensorrt) -> tuple[Flavour, dict]:
    """The flavour, and the engine cache's facts about this machine and its libraries."""
    flavour = detect_flavour()
    library = importlib.import_module(flavour.library_module)
    versions = library_versions(flavour, torch, torch_tensorrt, library)
    gpu, capability = _gpu_facts(torch)
    return flavour, {
        "gpu": gpu,
        "compute_capability": capability,
        "versions": versions,
        "flavour": flavour.name,
    }


def _prepare(model, inputs, config, device, precision: str) -> Prepared:
    """Place the model, then load its engine from the cache or build it, then describe the
    engines; the notes say which happened and how long it took."""
    import torch
    import torch_tensorrt

    flavour, environment = environment_facts(torch, torch_tensorrt)
    if config.memory_format == "auto":  # TensorRT picks its own layouts: feed plain tensors
        config = dataclasses.replace(config, memory_format="contiguous")
    weights = engine_cache.state_dict_digest(model)
    model, inputs, notes = place(model, inputs, config, device, precision)
    facts = cache_facts(
        config, precision, weights, inputs, environment, memory_format=notes["memory_format"]
    )
    notes.update(
        {
            "flavour": flavour.name,
            "distribution": flavour.distribution,
            "versions": environment["versions"],
            "compile_options": COMPILE_OPTIONS,
            "tf32": config.tf32,
        }
    )
    compiled, built, artifacts = cached_compile(
        torch_tensorrt, model, inputs, config, facts, f"{config.model} ttrt_{precision}"
    )
    notes.update(built)
    notes["artifacts"] = artifacts
    return Prepared(
        fn=_inference(torch, compiled),
        inputs=inputs,
        notes=notes,
        after_windows=partial(_layer_timing_after_windows, compiled, inputs, built["cache"]),
    )


def cache_facts(config, precision: str, weights: str, inputs, environment: dict, **more) -> dict:
    """Everything that decides an engine: the engine cache's key is made of these. ``more``:
    what else tells this engine apart (the memory format; a split engine's part)."""
    return {
        "model": config.model,
        "weights_sha256": weights,
        **more,
        "inputs": [[list(t.shape), str(t.dtype).replace("torch.", "")] for t in inputs],
        "backend": f"ttrt_{precision}",
        "precision": precision,
        "tf32": config.tf32,
        "compile_options": COMPILE_OPTIONS,
        **environment,
    }


def cached_compile(torch_tensorrt, model, inputs, config, facts: dict, what: str):
    """The compiled module for ``facts``: loaded from the engine cache, or built (and stored),
    then described. Used for a whole model and for each split engine of a generation.

    Returns (compiled, notes, artifacts): notes hold compile_s or load_s, the cache state,
    fallback_ops, engine_count, layer_files, engine_memory and warnings; artifacts the build log
    and each engine's layer JSON. The engines are described once, when built, and the
    description is kept in the cache entry's report; a hit reuses it. A failed build is one
    UserError naming ``what``, its log kept beside the run folder.
    """
    import torch

    notes: dict = {"warnings": []}
    cache_dir = Path(config.cache_dir) if config.cache_dir else engine_cache.default_dir()
    found = engine_cache.lookup(cache_dir, facts) if config.use_cache else None
    cache = {
        "enabled": config.use_cache,
        "key": engine_cache.cache_key(facts),
        "path": str(engine_cache.paths(cache_dir, engine_cache.cache_key(facts))[0]),
        "hit": False,
        "reason": found.reason if found else "--no-cache",
    }
    artifacts: dict[str, str] = {}
    with quiet_torch_loggers():
        compiled, description = (
            _load_cached(torch_tensorrt, found, cache_dir, notes, cache)
            if found is not None and found.hit
            else (None, None)
        )
        if compiled is None:
            compiled = _build(torch, torch_tensorrt, model, inputs, config, what, notes, artifacts)
            description = describe_engines(compiled)
            if config.use_cache:
                _store(
                    torch_tensorrt, compiled, inputs, cache_dir, facts, notes, cache, description
                )
    notes["cache"] = cache
    _add_description(description or describe_engines(compiled), notes, artifacts)
    return compiled, notes, artifacts


def _load_cached(torch_tensorrt, found, cache_dir: Path, notes: dict, cache: dict):
    """(the cached module, its engines' description from the report or None), or (None, None)
    for a stale or broken entry: said so in ``cache``, and the caller builds afresh."""
    began = time.perf_counter()
    try:
        compiled = torch_tensorrt.load(str(found.module_path)).module()
    except Exception as error:
        cache["reason"] = (
            f"cached module failed to load ({type(error).__name__}: "
            f"{str(error).splitlines()[0] if str(error) else ''}): rebuilt"
        )
        return None, None
    notes["load_s"] = time.perf_counter() - began
    report = engine_cache.read_report(cache_dir, found.key)
    cache.update(hit=True, reason="hit")
    notes["fallback_ops"] = report.get("fallback_ops", [])
    notes["profiling_verbosity"] = report.get("profiling_verbosity", "unknown")
    notes["built_compile_s"] = report.get("compile_s")
    return compiled, _stored_description(compiled, report.get("description"))


def _build(torch, torch_tensorrt, model, inputs, config, what: str, notes: dict, artifacts: dict):
    """Compile the engine, timed to the end of the GPU's work; a failed build is one line
    naming ``what`` and pointing at the build log kept beside the run."""
    from profiler.collect.device import Captured, captured_stderr

    workdir = Path(tempfile.mkdtemp(prefix="infer-profiler-trt-"))
    try:
        began = time.perf_counter()
        with captured_build_log() as log:
            native = Captured()
            try:
                with captured_stderr() as native:  # TensorRT's own messages, shown after it
                    compiled, build_notes = compile_module(
                        torch_tensorrt, model, inputs, config, str(workdir)
                    )
            except Exception as error:
                if "out of memory" in str(error).lower():
                    raise
                text = log.getvalue() + native.text
                path = save_failed_build(config, text, error)
                short = build_out_of_memory(text)
                if short is not None:
                    raise OutOfMemory(
                        f"CUDA out of memory while building the TensorRT engine "
                        f"for {what} at batch size {config.batch_size} (TensorRT: "
                        f"{short}); try a smaller --bs or free the GPU; log tail "
                        f"in {path}",
                        "CUDA",
                    ) from None
                first = first_line(error)
                raise UserError(
                    f"TensorRT build failed for {what} ({type(error).__name__}: "
                    f"{first}); log tail in {path}"
                ) from None
        torch.cuda.synchronize()
        notes["compile_s"] = time.perf_counter() - began
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    notes.update(build_notes)
    notes["fallback_ops"] = fallback_ops(compiled)
    artifacts[BUILD_LOG] = log.getvalue()
    shutil.rmtree(config.runs_dir / f"{config.run_name}.failed", ignore_errors=True)
    return compiled


# what describe_engines returns, and what a cache entry's report keeps under "description"
DESCRIPTION_KEYS = {"engine_count", "layers", "engine_memory", "warnings"}


def describe_engines(compiled) -> dict:
    """Properties of the engines, the same for a built module and that module loaded from the
    cache: how many, each engine's layer information (inspector JSON, by artifact name), the
    device memory they ask for, and warnings where layer information is missing. JSON-ready."""
    engines = find_engines(compiled)
    layers, warnings = {}, []
    for index, (_, source, _) in enumerate(engines):
        try:
            layers[f"engine_layers_{index}.json"] = layer_info(source)
        except Exception as error:
            warnings.append(f"engine {index}: no layer information ({error})")
    return {
        "engine_count": len(engines),
        "layers": layers,
        "engine_memory": engine_device_memory(engines, _tensorrt_library()),
        "warnings": warnings,
    }


def _stored_description(compiled, description) -> dict | None:
    """A cache entry's description of its engines, or None where the entry has none (made
    before descriptions were kept) or it is malformed. Where it holds no device memory size, the
    loaded engines are asked again (a loaded engine may tell what a built one did not)."""
    if not (
        isinstance(description, dict)
        and DESCRIPTION_KEYS <= set(description)
        and isinstance(description["layers"], dict)
        and isinstance(description["engine_memory"], dict)
    ):
        return None
    if (
        description["engine_count"]
        and description["engine_memory"].get("engine_device_memory_bytes") is None
    ):
        memory = engine_device_memory(find_engines(compiled), _tensorrt_library())
        description = {**description, "engine_memory": memory}
    return description


def _add_description(description: dict, notes: dict, artifacts: dict) -> None:
    """Warnings for ops left to PyTorch, the engines' description in the notes, and each
    engine's layer information as an artifact."""
    if notes["fallback_ops"]:
        notes["warnings"].append(
            f"{len(notes['fallback_ops'])} op(s) run in PyTorch, outside TensorRT: "
            + ", ".join(notes["fallback_ops"])
        )
    notes["warnings"] += description["warnings"]
    notes["engine_count"] = description["engine_count"]
    artifacts.update(description["layers"])
    notes["layer_files"] = sorted(description["layers"])
    notes["engine_memory"] = description["engine_memory"]


def _inference(torch, compiled):
    def forward(*args):
        with torch.inference_mode():
            return compiled(*args)

    return forward


def _layer_timing_after_windows(compiled, inputs, cache: dict) -> dict:
    """The engines' layer times: on a cache hit, those kept in the entry when its engine was
    first timed (the same engine on the same GPU and libraries: the cache key says so), saying
    when; otherwise measured now, and kept in the entry for the next hit. Measuring takes
    ~1.3 s of a ResNet50 FP16 run on an H200 (docs/gpu/h200/trt_cache)."""
    cache_dir = Path(cache["path"]).parent
    if cache.get("hit"):
        kept = _kept_layer_timing(engine_cache.read_report(cache_dir, cache["key"]))
        if kept is not None:
            return kept
    timing_dir = Path(tempfile.mkdtemp(prefix="infer-profiler-trt-layers-"))
    try:
        measured = layer_timing(compiled, inputs, timing_dir)
    except Exception as error:  # an API this version lacks: record why, keep the run
        return {"layer_timing": f"not available: {type(error).__name__}: {error}"}
    finally:
        shutil.rmtree(timing_dir, ignore_errors=True)
    if isinstance(measured["layer_timing"], dict):
        measured["layer_timing"]["measured"] = "in this run"
        if cache.get("enabled") and (cache.get("hit") or cache.get("stored")):
            at = time.strftime("%Y-%m-%dT%H:%M:%S%z")
            engine_cache.add_to_report(
                cache_dir,
                cache["key"],
                {"layer_timing": {**measured, "at": at}},
            )
    return measured


def _kept_layer_timing(report: dict) -> dict | None:
    """The layer times an entry's report keeps, as after_windows returns them, or None where
    it keeps none (or a malformed record)."""
    kept = report.get("layer_timing")
    if not (
        isinstance(kept, dict)
        and isinstance(kept.get("layer_timing"), dict)
        and isinstance(kept.get("artifacts"), dict)
        and all(isinstance(text, str) for text in kept["artifacts"].values())
        and isinstance(kept.get("at"), str)
    ):
        return None
    timing = dict(kept["layer_timing"])
    timing["measured"] = f"when this engine was first run ({kept['at']}), kept in the engine cache"
    return {"layer_timing": timing, "artifacts": dict(kept["artifacts"])}


def _store(
    torch_tensorrt,
    compiled,
    inputs,
    cache_dir: Path,
    facts: dict,
    notes: dict,
    cache: dict,
    description: dict,
) -> None:
    """Save the compiled module as an ExportedProgram, with what the build reported and the
    engines' description; a failure to save is noted, not fatal."""
    report = {
        "compile_s": notes["compile_s"],
        "fallback_ops": notes["fallback_ops"],
        "profiling_verbosity": notes.get("profiling_verbosity"),
        "description": description,
    }
    try:
        engine_cache.store(
            cache_dir,
            facts,
            lambda tmp: torch_tensorrt.save(
                compiled, str(tmp), output_format="exported_program", inputs=list(inputs)
            ),
            report,
        )
        cache["stored"] = True
    except Exception as error:
        cache["stored"] = False
        notes["warnings"].append(
            f"could not save the engine to the cache ({type(error).__name__}: "
            f"{str(error).splitlines()[0] if str(error) else ''})"
        )


for _precision in ("fp32", "fp16"):
    implement(f"ttrt_{_precision}", partial(_prepare, precision=_precision), missing=missing_reason)
