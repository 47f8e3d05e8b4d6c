"""The ttrt_* backends on a machine without CUDA or TensorRT.

Real here: flavour detection logic, the CLI's one-line errors, the listing of ops outside
TensorRT on a real exported graph, and the backend's prepare flow (cache miss, store, hit,
build failure) driven through a stand-in for torch_tensorrt. Faked, because it cannot exist on
CPU: the installed distributions (importlib.metadata answers), the ``torch_tensorrt`` and
``tensorrt_rtx`` modules, and the GPU's name. The stand-in compiles with torch.export, so its
"compiled" module has no TensorRT engines and every op counts as running in PyTorch. Nothing here
says how real TensorRT behaves; the GPU runs check that.
"""

import importlib.metadata
import inspect
import json
import logging
import os
import types
from pathlib import Path

import pytest
import torch

from profiler.collect.backends import tensorrt as ttrt
from profiler.errors import UserError
from profiler.runs.config import RunConfig
from tests.test_cli_errors import TINY, assert_nothing_written, assert_one_line_error


def fake_metadata(installed: dict, modules: set):
    def version_of(distribution):
        if distribution not in installed:
            raise importlib.metadata.PackageNotFoundError(distribution)
        return installed[distribution]

    def find_spec(name):
        return object() if name in modules else None

    return {"version_of": version_of, "find_spec": find_spec}


def test_full_tensorrt_flavour():
    flavour = ttrt.detect_flavour(
        **fake_metadata({"torch-tensorrt": "2.11.0"}, {"torch_tensorrt", "tensorrt"})
    )
    assert flavour == ttrt.Flavour("tensorrt", "torch-tensorrt", "2.11.0", "tensorrt")


def test_tensorrt_rtx_flavour():
    flavour = ttrt.detect_flavour(
        **fake_metadata({"torch-tensorrt-rtx": "2.11.0"}, {"torch_tensorrt", "tensorrt_rtx"})
    )
    assert flavour.name == "tensorrt-rtx" and flavour.library_module == "tensorrt_rtx"


def test_neither_installed_names_both_extras():
    with pytest.raises(UserError) as error:
        ttrt.detect_flavour(**fake_metadata({}, set()))
    message = str(error.value)
    assert ".[tensorrt]" in message and ".[tensorrt-rtx]" in message and "\n" not in message


def test_both_installed_is_refused():
    with pytest.raises(UserError, match="both installed.*uninstall one"):
        ttrt.detect_flavour(
            **fake_metadata(
                {"torch-tensorrt": "2.11.0", "torch-tensorrt-rtx": "2.11.0"},
                {"torch_tensorrt", "tensorrt", "tensorrt_rtx"},
            )
        )


def test_library_module_missing():
    with pytest.raises(UserError, match="library module 'tensorrt_rtx' is not"):
        ttrt.detect_flavour(**fake_metadata({"torch-tensorrt-rtx": "2.11.0"}, {"torch_tensorrt"}))
    with pytest.raises(UserError, match="torch_tensorrt module is missing"):
        ttrt.detect_flavour(**fake_metadata({"torch-tensorrt": "2.11.0"}, {"tensorrt"}))


@pytest.mark.skipif(ttrt.missing_reason() is None, reason="Torch-TensorRT is installed here")
@pytest.mark.parametrize("backend", ["ttrt_fp32", "ttrt_fp16"])
def test_ttrt_without_torch_tensorrt_is_one_line(cli, backend):
    done = cli("run", "--backend", backend, *TINY)
    assert_one_line_error(done, backend, "torch-tensorrt", ".[tensorrt]", ".[tensorrt-rtx]")
    assert_nothing_written()


def test_fallback_ops_lists_the_aten_ops_of_a_graph():
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU())
    graph = torch.export.export(model, (torch.randn(2, 4),)).module()
    ops = ttrt.fallback_ops(graph)
    assert "aten.relu.default" in ops and ops == sorted(ops)
    assert all(op.startswith("aten.") for op in ops)


def test_find_engines_reads_runtime_modules():
    """A stand-in for a C++-runtime TorchTensorRTModule: get_layer_info() and an .engine."""

    class FakeEngine:
        def enable_profiling(self):
            pass

    class FakeTRTModule(torch.nn.Module):
        engine = FakeEngine()

        def get_layer_info(self):
            return '{"Layers": []}'

    root = torch.nn.Module()
    root.trt = FakeTRTModule()
    found = ttrt.find_engines(root)
    assert [(name, type(engine).__name__) for name, _, engine in found] == [("trt", "FakeEngine")]
    assert ttrt.layer_info(found[0][1]) == '{"Layers": []}'


# ----- the prepare flow, with a stand-in torch_tensorrt ------------------------------------------


@pytest.fixture
def fake_trt(monkeypatch, tmp_path):
    calls = []
    state = {"fail": False}
    module = types.ModuleType("torch_tensorrt")
    module.__version__ = "2.11.0"

    def compile(model, ir="default", inputs=None, *, arg_inputs=None, kwarg_inputs=None, **options):
        calls.append({"ir": ir, **options})
        logging.getLogger("torch_tensorrt [TensorRT Conversion Context]").info("fake build starts")
        if state["fail"] == "oom":  # as TensorRT-RTX 1.4 failed on an H100 with 1 GiB free
            os.write(
                2,
                b"ERROR: [Torch-TensorRT] - [executionContext.cpp::initializeExecution"
                b"Context::644] Error Code 2: OutOfMemory (Requested size was 157679616 "
                b"bytes.)\n",
            )
            raise RuntimeError(
                "[Error thrown at core/runtime/TRTEngine.cpp:281] Expected "
                "(exec_ctx.get() != nullptr) to be true but got false"
            )
        if state["fail"]:
            logging.getLogger("torch_tensorrt [TensorRT Conversion Context]").error(
                "Error Code 4: Internal Error (fake)"
            )
            raise RuntimeError("Failed to build the TensorRT engine\nsecond line")
        return trace(model, inputs or arg_inputs, kwarg_inputs or {}).module()

    def trace(model, arg_inputs, kwarg_inputs):
        """As torch_tensorrt.dynamo.trace (2.11) exports: dynamic shapes keyed by the forward's
        parameter names, one per input ({} for a tensor: static), handed to torch.export, which
        checks their structure against the arguments."""
        names = list(inspect.signature(model.forward).parameters)[: len(arg_inputs)]
        dynamic_shapes = {name: {} for name in names}
        dynamic_shapes.update({name: {} for name in kwarg_inputs})
        return torch.export.export(
            model,
            tuple(arg_inputs),
            kwargs=kwarg_inputs,
            dynamic_shapes=dynamic_shapes,
            strict=False,
        )

    def save(graph, path, output_format, inputs):
        torch.export.save(torch.export.export(graph, tuple(inputs)), path)

    module.compile, module.save, module.load = compile, save, torch.export.load
    library = types.ModuleType("tensorrt_rtx")
    library.__version__ = "1.4.0"
    monkeypatch.setitem(__import__("sys").modules, "torch_tensorrt", module)
    monkeypatch.setitem(__import__("sys").modules, "tensorrt_rtx", library)
    monkeypatch.setattr(
        ttrt,
        "detect_flavour",
        lambda: ttrt.Flavour("tensorrt-rtx", "torch-tensorrt-rtx", "2.11.0", "tensorrt_rtx"),
    )
    monkeypatch.setattr(ttrt, "_gpu_facts", lambda torch_module: ("Fake GPU", "9.0"))
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *args: None)
    return calls, state


def prepare(tmp_path, **overrides):
    from tests.tiny_models import conv_net

    config = RunConfig(
        backend="ttrt_fp32",
        model="tests.tiny_models:conv_net",
        batch_size=2,
        cache_dir=tmp_path / "cache",
        runs_dir=tmp_path / "runs",
        **overrides,
    )
    model, inputs = conv_net(batch_size=2)
    return ttrt._prepare(model.eval(), inputs, config, torch.device("cpu"), "fp32")


def test_build_then_cache_hit(fake_trt, tmp_path):
    calls, _ = fake_trt
    first = prepare(tmp_path)
    notes = first.notes
    assert calls == [
        {"ir": "dynamo", "use_explicit_typing": True, "min_block_size": 5, "disable_tf32": True}
    ]
    assert notes["flavour"] == "tensorrt-rtx"
    assert notes["versions"] == {
        "torch": torch.__version__,
        "torch_tensorrt": "2.11.0",
        "tensorrt_rtx": "1.4.0",
    }
    assert notes["cache"]["hit"] is False and notes["cache"]["reason"] == "no entry"
    assert notes["cache"]["stored"] is True and Path(notes["cache"]["path"]).is_file()
    assert notes["compile_s"] > 0 and "load_s" not in notes
    assert "aten.conv2d.default" in notes["fallback_ops"]  # no engines in the stand-in
    assert any("run in PyTorch" in w for w in notes["warnings"])
    assert notes["engine_count"] == 0 and notes["layer_files"] == []
    assert "fake build starts" in notes["artifacts"]["tensorrt_build.log"]
    expected = first.fn(*first.inputs)

    second = prepare(tmp_path)
    assert len(calls) == 1  # loaded, not rebuilt
    assert second.notes["cache"]["hit"] is True and second.notes["load_s"] > 0
    assert "compile_s" not in second.notes
    assert second.notes["fallback_ops"] == notes["fallback_ops"]
    assert torch.equal(second.fn(*second.inputs), expected)
    assert second.after_windows() == {
        "layer_timing": "not available: no C++-runtime engines (Python runtime)"
    }

    third = prepare(tmp_path, use_cache=False)
    assert len(calls) == 2 and third.notes["cache"]["reason"] == "--no-cache"


def test_other_tf32_setting_is_another_entry(fake_trt, tmp_path):
    calls, _ = fake_trt
    prepare(tmp_path)
    again = prepare(tmp_path, tf32=True)
    assert len(calls) == 2 and calls[1]["disable_tf32"] is False
    assert again.notes["cache"]["hit"] is False


def test_a_build_out_of_gpu_memory_says_so_in_one_line(fake_trt, tmp_path, capfd):
    """TensorRT says it ran out of memory on fd 2, and the exception says something else: the
    one line says out of memory (a sweep records it as oom), the message is still shown, the log
    keeps it, and the cache holds nothing."""
    from profiler.errors import OutOfMemory

    _, state = fake_trt
    state["fail"] = "oom"
    with pytest.raises(OutOfMemory) as error:
        prepare(tmp_path)
    message = str(error.value)
    assert "\n" not in message and error.value.kind == "CUDA"
    assert message.startswith("CUDA out of memory while building the TensorRT engine")
    assert "at batch size 2" in message and "Requested size was 157679616 bytes" in message
    assert "Error Code 2: OutOfMemory" in capfd.readouterr().err
    log = tmp_path / "runs" / "ttrt_fp32_bs2_conv_net.failed" / "tensorrt_build.log"
    assert str(log) in message and "Error Code 2: OutOfMemory" in log.read_text()
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").iterdir())


def test_failed_build_is_one_line_and_keeps_the_log_beside_the_run(fake_trt, tmp_path):
    _, state = fake_trt
    state["fail"] = True
    with pytest.raises(UserError) as error:
        prepare(tmp_path)
    message = str(error.value)
    log = tmp_path / "runs" / "ttrt_fp32_bs2_conv_net.failed" / "tensorrt_build.log"
    assert "\n" not in message and "TensorRT build failed" in message and str(log) in message
    assert "Failed to build the TensorRT engine" in message
    text = log.read_text()
    assert "Error Code 4: Internal Error (fake)" in text and "RuntimeError" in text
    assert not (tmp_path / "runs" / "ttrt_fp32_bs2_conv_net").exists()
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").iterdir())
    # the next successful build clears the stale failure folder
    state["fail"] = False
    prepare(tmp_path)
    assert not log.parent.exists()


def test_sidecar_report_is_json(fake_trt, tmp_path):
    prepare(tmp_path)
    sidecars = list((tmp_path / "cache").glob("*.json"))
    assert len(sidecars) == 1
    data = json.loads(sidecars[0].read_text())
    assert data["facts"]["gpu"] == "Fake GPU" and data["facts"]["backend"] == "ttrt_fp32"
    assert data["report"]["fallback_ops"]


# ----- the engines' description: made at build, kept in the cache entry, reused on a hit ---------


class FakeEngineSource:
    """What find_engines yields as a built (or loaded) engine: its inspector JSON and the device
    memory it asks for. ``broken``: an engine without layer information."""

    def __init__(self, index: int, broken: bool = False):
        self.index, self.broken = index, broken
        self.device_memory_size_v2 = 1024 * (index + 1)

    def get_layer_info(self):
        if self.broken:
            raise RuntimeError("inspector unavailable")
        return json.dumps({"Layers": [f"conv_{self.index}", f"relu_{self.index}"]})


@pytest.fixture
def fake_engines(monkeypatch):
    """Every compiled or loaded module holds the same three engines, the last one without layer
    information (the stand-in torch_tensorrt's modules hold none)."""
    sources = [FakeEngineSource(0), FakeEngineSource(1), FakeEngineSource(2, broken=True)]
    monkeypatch.setattr(
        ttrt,
        "find_engines",
        lambda module: [(f"_run_on_acc_{source.index}", source, None) for source in sources],
    )
    return sources


def counted(monkeypatch, name: str) -> list:
    """Replace ttrt.<name> with a wrapper that records each call; returns the record."""
    calls, original = [], getattr(ttrt, name)

    def wrapper(*args, **kwargs):
        calls.append(args)
        return original(*args, **kwargs)

    monkeypatch.setattr(ttrt, name, wrapper)
    return calls


def sidecar_path(tmp_path) -> Path:
    (path,) = (tmp_path / "cache").glob("*.json")
    return path


def layer_artifacts(prepared) -> dict:
    return {
        name: text.encode()
        for name, text in prepared.notes["artifacts"].items()
        if name.startswith("engine_layers_")
    }


DESCRIBED = ("engine_count", "layer_files", "engine_memory", "warnings", "fallback_ops")


def test_build_keeps_the_description_and_a_hit_reuses_it(
    fake_trt, fake_engines, tmp_path, monkeypatch
):
    first = prepare(tmp_path)
    notes = first.notes
    assert notes["engine_count"] == 3
    assert notes["layer_files"] == ["engine_layers_0.json", "engine_layers_1.json"]
    assert notes["engine_memory"] == {
        "engine_device_memory_bytes": 1024 + 2048 + 3072,
        "per_engine_bytes": [1024, 2048, 3072],
        "why_not": None,
    }
    assert notes["warnings"][-1] == "engine 2: no layer information (inspector unavailable)"
    assert any("run in PyTorch" in w for w in notes["warnings"])
    description = json.loads(sidecar_path(tmp_path).read_text())["report"]["description"]
    assert description["engine_count"] == 3
    assert description["engine_memory"] == notes["engine_memory"]
    assert {n: t.encode() for n, t in description["layers"].items()} == layer_artifacts(first)

    def refuse(*args, **kwargs):
        raise AssertionError("a cached engine was described again")

    monkeypatch.setattr(ttrt, "layer_info", refuse)
    monkeypatch.setattr(ttrt, "engine_device_memory", refuse)
    second = prepare(tmp_path)
    assert second.notes["cache"]["hit"] is True
    assert {k: second.notes[k] for k in DESCRIBED} == {k: notes[k] for k in DESCRIBED}
    assert layer_artifacts(second) == layer_artifacts(first) and layer_artifacts(first)


@pytest.mark.parametrize("stale", ["missing", "malformed"])
def test_a_sidecar_without_a_description_is_described_as_before(
    fake_trt, fake_engines, tmp_path, monkeypatch, stale
):
    first = prepare(tmp_path)
    path = sidecar_path(tmp_path)
    sidecar = json.loads(path.read_text())
    if stale == "missing":  # an entry stored before descriptions were kept
        del sidecar["report"]["description"]
    else:
        sidecar["report"]["description"] = {"engine_count": 3}
    path.write_text(json.dumps(sidecar))
    layer_calls = counted(monkeypatch, "layer_info")
    memory_calls = counted(monkeypatch, "engine_device_memory")
    second = prepare(tmp_path)
    assert second.notes["cache"]["hit"] is True
    assert len(layer_calls) == 3 and len(memory_calls) == 1
    assert {k: second.notes[k] for k in DESCRIBED} == {k: first.notes[k] for k in DESCRIBED}
    assert layer_artifacts(second) == layer_artifacts(first)


def test_a_hit_asks_again_for_device_memory_the_build_could_not_read(
    fake_trt, fake_engines, tmp_path, monkeypatch
):
    for source in fake_engines:
        del source.device_memory_size_v2
    first = prepare(tmp_path)
    assert first.notes["engine_memory"]["engine_device_memory_bytes"] is None
    for source in fake_engines:  # the loaded engines tell what the built ones did not
        source.device_memory_size_v2 = 4096
    layer_calls = counted(monkeypatch, "layer_info")
    second = prepare(tmp_path)
    assert layer_calls == []
    assert second.notes["engine_memory"]["engine_device_memory_bytes"] == 3 * 4096
    assert layer_artifacts(second) == layer_artifacts(first)


def test_a_hit_reuses_the_layer_times_its_engine_was_first_timed_with(
    fake_trt, tmp_path, monkeypatch
):
    timed = []

    def fake_layer_timing(compiled, inputs, workdir, iters=ttrt.LAYER_TIMING_ITERS):
        timed.append(workdir)
        return {
            "layer_timing": {"iterations": iters, "files": ["engine_layer_times_0.json"]},
            "artifacts": {"engine_layer_times_0.json": f'[{{"run": {len(timed)}}}]'},
        }

    monkeypatch.setattr(ttrt, "layer_timing", fake_layer_timing)
    built = prepare(tmp_path).after_windows()
    assert len(timed) == 1 and built["layer_timing"]["measured"] == "in this run"
    kept = json.loads(sidecar_path(tmp_path).read_text())["report"]["layer_timing"]
    assert kept["artifacts"] == built["artifacts"]

    hit = prepare(tmp_path).after_windows()
    assert len(timed) == 1  # not timed again
    assert hit["artifacts"] == {"engine_layer_times_0.json": '[{"run": 1}]'}
    assert hit["layer_timing"]["measured"].startswith("when this engine was first run (")
    assert hit["layer_timing"]["iterations"] == ttrt.LAYER_TIMING_ITERS

    sidecar = json.loads(sidecar_path(tmp_path).read_text())
    sidecar["report"]["layer_timing"]["artifacts"] = {"engine_layer_times_0.json": 7}
    sidecar_path(tmp_path).write_text(json.dumps(sidecar))
    again = prepare(tmp_path).after_windows()  # a malformed record: timed again, and kept
    assert len(timed) == 2 and again["artifacts"] == {"engine_layer_times_0.json": '[{"run": 2}]'}
    assert prepare(tmp_path).after_windows()["artifacts"] == again["artifacts"]

    assert prepare(tmp_path, use_cache=False).after_windows()["layer_timing"]["measured"] == (
        "in this run"
    )
    assert len(timed) == 3
