"""ONNX Runtime: ``torch.onnx.export(dynamo=True)``, then an InferenceSession with IO binding.

``ort_fp32`` exports the FP32 model; ``ort_fp16`` exports the model cast to half (``model.half()``
before export, so every weight and activation in the graph is float16; no float16 conversion pass on
the ONNX file). The exported ``.onnx`` is kept in the engine cache
(profiler/collect/engine_cache.py), keyed like the TensorRT engines (model, weights digest, input
shapes, precision, versions).
On a GPU the session runs on the CUDA execution provider, on PyTorch's current CUDA stream
(``user_compute_stream``), with TF32 off unless ``--tf32`` (the EP's ``use_tf32`` is on by
default). Inputs and outputs are bound to the torch tensors' device memory (IO binding), so the
timed loop makes no host copies. Without a GPU the CPU execution provider runs it.

Each call runs inside ``record_function("onnxruntime::run")``, so the kernels ORT launches link to
that operator in the trace (no ATen operator launches them). After the timed and profiled windows
a second session with ORT's own profiler on runs once: it says which provider ran every node
(``nodes_per_provider``, ``cpu_fallback_nodes``), and its JSON is kept as ``ort_profile.json``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.metadata
import inspect
import io
import json
import logging
import os
import re
import shutil
import tempfile
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path

from profiler.collect import engine_cache
from profiler.collect.backends.base import Prepared, implement
from profiler.collect.backends.eager import place
from profiler.collect.backends.tensorrt import save_failed_build
from profiler.errors import UserError, first_line

EXTRA_HINT = 'pip install -e ".[onnx]"'
EXPORT_LOG = "onnx_export.log"
PROFILE_ARTIFACT = "ort_profile.json"
# what ONNX Runtime's C++ logger wrote while sessions were made and first run
SESSION_LOG = "ort_session.log"
# what is exported: part of the cache key and recorded in the notes
EXPORT_OPTIMIZE = True
EXPORT_OPTIONS = {"exporter": "torch.onnx.export(dynamo=True)", "optimize": EXPORT_OPTIMIZE}
RECORD_FUNCTION = "onnxruntime::run"
# "2026-11-23 01:47:28.07 [E:onnxruntime:Default, cudnn_fe_call.cc:39 Fn] message"
_LOG_LINE = re.compile(r"\[(?P<level>[VIWEF]):onnxruntime:[^\]]*\]\s*(?P<message>.*)")
# torch dtype name -> numpy dtype name, for IO binding
ELEMENT_TYPES = {
    "float32": "float32",
    "float16": "float16",
    "int64": "int64",
    "int32": "int32",
    "bool": "bool_",
}


def _missing() -> str | None:
    import importlib.util

    absent = [
        name
        for name in ("onnxruntime", "onnx", "onnxscript")
        if importlib.util.find_spec(name) is None
    ]
    if absent:
        return (
            f"the Python package(s) {', '.join(absent)} are not installed ({EXTRA_HINT}; "
            "onnxruntime-gpu for the CUDA execution provider)"
        )
    return None


def _versions(torch_module) -> dict:
    versions = {"torch": torch_module.__version__}
    for distribution in ("onnx", "onnxscript", "onnxruntime", "onnxruntime-gpu"):
        try:
            versions[distribution] = importlib.metadata.version(distribution)
        except importlib.metadata.PackageNotFoundError:
            continue
    return versions


@contextlib.contextmanager
def captured_output():
    """Collect what the exporter prints (stdout, stderr, torch.onnx's logger) into one buffer."""
    buffer = io.StringIO()
    handler = logging.StreamHandler(buffer)
    logger = logging.getLogger("torch.onnx")
    logger.addHandler(handler)
    try:
        with contextlib.redirect_stdout(buffer), contextlib.redirect_stderr(buffer):
            yield buffer
    finally:
        logger.removeHandler(handler)


@contextlib.contextmanager
def native_stderr() -> Iterator[list[str]]:
    """Send file descriptor 2 to a buffer: ONNX Runtime's C++ logger writes there, not through
    Python. Yields a list that holds the captured text after the block."""
    import sys

    captured: list[str] = []
    with tempfile.TemporaryFile(mode="w+b") as sink:
        sys.stderr.flush()
        saved = os.dup(2)
        os.dup2(sink.fileno(), 2)
        try:
            yield captured
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            captured.append(sink.read().decode("utf-8", "replace"))


def log_digest(text: str) -> dict:
    """Counts of what ORT logged, by severity letter ([E:onnxruntime...], [W:...]), and its most
    repeated line, without the timestamp and colour codes."""
    counts: dict[str, int] = {}
    messages: dict[str, int] = {}
    for line in text.splitlines():
        match = _LOG_LINE.search(line)
        if not match:
            continue
        counts[match["level"]] = counts.get(match["level"], 0) + 1
        message = match["message"].strip().removesuffix("\x1b[m").strip()
        messages[message] = messages.get(message, 0) + 1
    top = max(messages.items(), key=lambda item: item[1]) if messages else None
    return {"lines_by_level": counts, "most_repeated": f"{top[1]} x {top[0]}" if top else None}


def input_names(model, count: int) -> list[str]:
    """The forward parameter names of the model's first ``count`` inputs (the exporter names the
    graph inputs after them)."""
    params = [
        p.name
        for p in inspect.signature(model.forward).parameters.values()
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    return params[:count] if len(params) >= count else [f"input_{i}" for i in range(count)]


def export(model, inputs, path: Path, config, precision: str) -> str:
    """Export to ONNX at ``path`` and return the exporter's log; a failure is one line, with the
    log kept in runs/<run>.failed/onnx_export.log."""
    import torch

    with captured_output() as log:
        try:
            with torch.no_grad():
                program = torch.onnx.export(
                    model,
                    inputs,
                    dynamo=True,
                    optimize=EXPORT_OPTIMIZE,
                    verbose=False,
                    input_names=input_names(model, len(inputs)),
                )
            assert program is not None  # dynamo=True: the exported program
            program.save(str(path))
        except Exception as error:
            failed = save_failed_build(config, log.getvalue(), error, log_name=EXPORT_LOG)
            first = first_line(error)
            raise UserError(
                f"ONNX export failed for {config.model} ort_{precision} "
                f"({type(error).__name__}: {first}); log in {failed}"
            ) from None
    return log.getvalue()


def providers_for(ort, device, config) -> list:
    """The execution providers to ask for: CUDA (on torch's stream, TF32 as --tf32) then CPU on
    a GPU machine, CPU alone otherwise."""
    if device.type != "cuda":
        return ["CPUExecutionProvider"]
    if "CUDAExecutionProvider" not in ort.get_available_providers():
        raise UserError(
            "this onnxruntime has no CUDAExecutionProvider (the CPU-only onnxruntime "
            f"package?): pip uninstall onnxruntime, then {EXTRA_HINT}"
        )
    import torch

    options = {
        "device_id": str(device.index or 0),
        "use_tf32": "1" if config.tf32 else "0",
        "has_user_compute_stream": "1",
        "user_compute_stream": str(torch.cuda.current_stream(device).cuda_stream),
    }
    return [("CUDAExecutionProvider", options), "CPUExecutionProvider"]


def make_session(ort, model_path: Path, providers: list, profile_prefix: str | None = None):
    options = ort.SessionOptions()
    # warnings and errors; they are captured into ort_session.log (native_stderr), where the
    # CUDA EP's FP16 convolutions log dozens of "[cudnn_frontend] Error: No execution plans
    # support the graph." lines while cuDNN's frontend probes engines (seen on an H100)
    options.log_severity_level = 2
    if profile_prefix:
        options.enable_profiling = True
        options.profile_file_prefix = profile_prefix
    return ort.InferenceSession(str(model_path), sess_options=options, providers=providers)


@dataclasses.dataclass
class BoundSession:
    """A session with its inputs and outputs bound to torch tensors' memory."""

    session: object
    binding: object
    outputs: list

    def run(self):
        import torch

        with torch.profiler.record_function(RECORD_FUNCTION):
            self.session.run_with_iobinding(self.binding)
        return self.outputs[0] if len(self.outputs) == 1 else tuple(self.outputs)


def bind(session, named_inputs: dict, device) -> BoundSession:
    """Bind every graph input to its torch tensor and every output to a torch tensor allocated
    once here (the shapes are static: the export saw fixed shapes). Inputs the exporter dropped
    (unused by the graph) are left out."""
    import numpy as np
    import torch

    graph_inputs = session.get_inputs()
    binding = session.io_binding()
    device_type = "cuda" if device.type == "cuda" else "cpu"
    device_id = device.index or 0
    for graph_input in graph_inputs:
        if graph_input.name not in named_inputs:
            raise RuntimeError(
                f"the ONNX graph's input {graph_input.name!r} is none of the "
                f"model's inputs {sorted(named_inputs)}"
            )
        tensor = named_inputs[graph_input.name]
        binding.bind_input(
            graph_input.name,
            device_type,
            device_id,
            getattr(np, ELEMENT_TYPES[str(tensor.dtype).replace("torch.", "")]),
            list(tensor.shape),
            tensor.data_ptr(),
        )
    # one plain run (host copies, before any timing) tells the output shapes and dtypes
    feeds = {i.name: named_inputs[i.name].detach().cpu().numpy() for i in graph_inputs}
    outputs = []
    for meta, value in zip(session.get_outputs(), session.run(None, feeds)):
        tensor = torch.empty(
            value.shape, dtype=torch.from_numpy(value[:0].copy()).dtype, device=device
        )
        binding.bind_output(
            meta.name, device_type, device_id, value.dtype, list(tensor.shape), tensor.data_ptr()
        )
        outputs.append(tensor)
    return BoundSession(session, binding, outputs)


def node_placement(profile_path: Path) -> dict:
    """From ORT's profile JSON: how many nodes each provider ran, and which ran on the CPU."""
    events = json.loads(profile_path.read_text(encoding="utf-8"))
    per_provider: dict[str, int] = {}
    cpu_nodes: list[str] = []
    seen = set()
    for event in events:
        args = event.get("args") or {}
        if event.get("cat") != "Node" or "provider" not in args:
            continue
        node = event.get("name", "").removesuffix("_kernel_time")
        if node in seen or not event.get("name", "").endswith("_kernel_time"):
            continue
        seen.add(node)
        provider = args["provider"]
        per_provider[provider] = per_provider.get(provider, 0) + 1
        if provider == "CPUExecutionProvider":
            cpu_nodes.append(f"{node} ({args.get('op_name', '?')})")
    return {"nodes_per_provider": per_provider, "cpu_nodes": cpu_nodes}


def _prepare(model, inputs, config, device, precision: str) -> Prepared:
    import onnxruntime as ort
    import torch

    if config.memory_format == "auto":  # ONNX graphs are NCHW: feed plain tensors
        config = dataclasses.replace(config, memory_format="contiguous")
    weights = engine_cache.state_dict_digest(model)
    model, inputs, notes = place(model, inputs, config, device, precision)
    versions = _versions(torch)
    facts = {
        "model": config.model,
        "weights_sha256": weights,
        "inputs": [[list(t.shape), str(t.dtype).replace("torch.", "")] for t in inputs],
        "backend": f"ort_{precision}",
        "precision": precision,
        "export_options": EXPORT_OPTIONS,
        "versions": versions,
        "format": "onnx",
    }
    notes.update(
        {
            "versions": versions,
            "export_options": EXPORT_OPTIONS,
            "tf32": config.tf32,
            "warnings": [],
        }
    )
    artifacts: dict[str, str] = {}
    model_path, workdir = _onnx_model(model, inputs, config, precision, facts, notes, artifacts)
    providers = providers_for(ort, device, config)
    named_inputs, bound = _bound_session(
        ort, model_path, providers, model, inputs, device, notes, artifacts
    )
    notes["artifacts"] = artifacts

    def forward(*args):
        return bound.run()

    def after_windows() -> dict:
        return probe_placement(ort, model_path, providers, named_inputs, device, workdir)

    return Prepared(fn=forward, inputs=inputs, notes=notes, after_windows=after_windows)


def _onnx_model(
    model, inputs, config, precision: str, facts: dict, notes: dict, artifacts: dict[str, str]
) -> tuple[Path, Path]:
    """The ONNX file, from the cache or exported (and then stored there); with the working
    folder beside it. Notes the cache's outcome."""
    cache_dir = Path(config.cache_dir) if config.cache_dir else engine_cache.default_dir()
    found = engine_cache.lookup(cache_dir, facts) if config.use_cache else None
    key = engine_cache.cache_key(facts)
    cache = {
        "enabled": config.use_cache,
        "key": key,
        "path": str(engine_cache.paths(cache_dir, key)[0]),
        "hit": bool(found and found.hit),
        "reason": found.reason if found else "--no-cache",
    }
    workdir = Path(tempfile.mkdtemp(prefix="infer-profiler-ort-"))
    if found is not None and found.hit:
        model_path = found.module_path
    else:
        model_path = workdir / "model.onnx"
        began = time.perf_counter()
        artifacts[EXPORT_LOG] = export(model, inputs, model_path, config, precision)
        notes["export_s"] = time.perf_counter() - began
        shutil.rmtree(config.runs_dir / f"{config.run_name}.failed", ignore_errors=True)
        if config.use_cache:
            try:
                engine_cache.store(
                    cache_dir,
                    facts,
                    lambda tmp: shutil.copyfile(model_path, tmp),
                    {"export_s": notes["export_s"]},
                )
                cache["stored"] = True
            except OSError as error:
                cache["stored"] = False
                notes["warnings"].append(f"could not save the ONNX file to the cache ({error})")
    notes["cache"] = cache
    return model_path, workdir


def _bound_session(
    ort, model_path: Path, providers: list, model, inputs, device, notes: dict, artifacts: dict
):
    """An ORT session on ``model_path`` with its inputs and outputs bound on ``device``; with
    the named inputs. Notes the session's time, providers and log."""
    began = time.perf_counter()
    named_inputs = dict(zip(input_names(model, len(inputs)), (t.contiguous() for t in inputs)))
    with native_stderr() as ort_log:
        session = make_session(ort, model_path, providers)
        bound = bind(session, named_inputs, device)
    notes["session_s"] = time.perf_counter() - began
    notes["compile_s"] = notes.get("export_s", 0.0) + notes["session_s"]
    notes["providers"] = session.get_providers()
    if device.type == "cuda" and notes["providers"][0] != "CUDAExecutionProvider":
        notes["warnings"].append(
            "the CUDA execution provider was asked for but not used: "
            f"providers {notes['providers']}"
        )
    notes["io_binding"] = f"inputs and outputs bound on {device.type}"
    if ort_log[0].strip():
        artifacts[SESSION_LOG] = ort_log[0]
        notes["ort_log"] = log_digest(ort_log[0])
    return named_inputs, bound


def probe_placement(
    ort, model_path: Path, providers: list, named_inputs: dict, device, workdir: Path
) -> dict:
    """One run of a second session with ORT's profiler on: which provider ran each node."""
    try:
        with native_stderr():  # the same log lines again: the first session's are kept
            session = make_session(ort, model_path, providers, str(workdir / "ort_profile"))
            bind(session, named_inputs, device).run()
        profile = Path(session.end_profiling())
        placement = node_placement(profile)
        text = profile.read_text(encoding="utf-8")
    except Exception as error:  # the placement is a report, not the measurement: keep the run
        shutil.rmtree(workdir, ignore_errors=True)
        return {"cpu_fallback_nodes": f"not available: {type(error).__name__}: {error}"}
    main = providers[0] if isinstance(providers[0], str) else providers[0][0]
    notes = {
        "nodes_per_provider": placement["nodes_per_provider"],
        "cpu_fallback_nodes": placement["cpu_nodes"] if main != "CPUExecutionProvider" else [],
        "artifacts": {PROFILE_ARTIFACT: text},
    }
    with contextlib.suppress(OSError):
        os.unlink(profile)
    shutil.rmtree(workdir, ignore_errors=True)
    return notes


for _precision in ("fp32", "fp16"):
    implement(f"ort_{_precision}", partial(_prepare, precision=_precision), missing=_missing)
