"""ONNX Runtime, INT8 and FP8 backends on the CPU.

Real here: ort_fp32 end to end on the CPU execution provider (export, engine cache, IO binding,
ORT's profiler for node placement, the trace's onnxruntime::run operator, the numeric check);
inductor_int8 end to end with calibration data (torchao + Inductor's C++ backend); the Linear
selection and FLOP shares; every bad-input line. Stand-ins, because they cannot exist here:
ModelOpt and Torch-TensorRT for ttrt_int8/ttrt_fp8 (their flow is checked, not their output),
and a missing package (importlib's find_spec answers "not installed").
"""

import contextlib
import gzip
import importlib.util
import json
import sys
import types
from pathlib import Path

import pytest
import torch

from profiler.collect.backends import onnxruntime as ort_backend, quantized
from profiler.errors import UserError
from profiler.runs.config import RunConfig, run_name
from tests.test_cli_errors import assert_nothing_written, assert_one_line_error

ORT_MISSING = ort_backend._missing()
TORCHAO_MISSING = importlib.util.find_spec("torchao") is None
FAST = ["--iters", "3", "--timed-warmup", "1", "--wait", "0", "--warmup", "1", "--active", "1"]


def hide_module(monkeypatch, name: str) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda module, *a: None if module == name else real(module, *a)
    )


def _events(trace: Path) -> list[dict]:
    with gzip.open(trace, "rt") as handle:
        return json.load(handle)["traceEvents"]


# ---- ort_fp32 ----------------------------------------------------------------------------------


@pytest.mark.skipif(ORT_MISSING is not None, reason=f"ONNX Runtime not installed: {ORT_MISSING}")
def test_ort_fp32_end_to_end_on_the_cpu(cli, tmp_path):
    done = cli(
        "run",
        "--backend",
        "ort_fp32",
        "--model",
        "resnet18",
        "--image-size",
        "32",
        "--bs",
        "1",
        *FAST,
        "--cache-dir",
        str(tmp_path / "cache"),
        "--json",
    )
    assert done.code == 0, done.stderr
    result = json.loads(done.stdout)
    notes = result["backend"]["notes"]
    assert result["backend"]["family"] == "onnxruntime"
    assert notes["providers"] == ["CPUExecutionProvider"]
    assert notes["cpu_fallback_nodes"] == []  # the CPU is the main provider here
    assert notes["nodes_per_provider"]["CPUExecutionProvider"] > 10
    assert notes["export_s"] > 0 and notes["cache"]["stored"] is True
    assert Path(notes["cache"]["path"]).is_file()
    assert "onnx_export.log" in result["artifacts"]
    # ORT's own node-level profile is kept in the run folder
    run_dir = tmp_path / "runs" / run_name("ort_fp32", 1, "resnet18")
    profile = json.loads((run_dir / "ort_profile.json").read_text())
    assert any(e.get("cat") == "Node" and e["args"].get("op_name") == "Conv" for e in profile)
    # the same numbers as eager FP32: ORT's CPU kernels are FP32
    assert result["numerics"]["rel_l2_error"] < 1e-4 and result["numerics"]["top1_agreement"] == 1
    # each call is an onnxruntime::run operator in the trace, inside the profiled step
    events = _events(Path(result["trace"]["files"][0]))
    runs = [e for e in events if e.get("name") == ort_backend.RECORD_FUNCTION]
    assert len(runs) == 1 and runs[0]["cat"] == "user_annotation"
    assert runs[0]["args"]["External id"] >= 0
    assert not any(e.get("cat") == "cpu_op" and e["name"] == "aten::conv2d" for e in events)

    again = cli(
        "run",
        "--backend",
        "ort_fp32",
        "--model",
        "resnet18",
        "--image-size",
        "32",
        "--bs",
        "1",
        *FAST,
        "--cache-dir",
        str(tmp_path / "cache"),
        "--json",
    )
    notes = json.loads(again.stdout)["backend"]["notes"]
    assert notes["cache"]["hit"] is True and "export_s" not in notes


@pytest.mark.skipif(ORT_MISSING is not None, reason=f"ONNX Runtime not installed: {ORT_MISSING}")
def test_failed_export_is_one_line_and_keeps_the_log(cli, tmp_path):
    done = cli(
        "run",
        "--backend",
        "ort_fp32",
        "--model",
        "tests.tiny_models:not_exportable",
        *FAST,
        "--no-cache",
    )
    folder = run_name("ort_fp32", 8, "tests.tiny_models:not_exportable")
    log = Path("runs") / f"{folder}.failed" / ort_backend.EXPORT_LOG
    assert_one_line_error(done, "ONNX export failed", str(log), progress_before=True)
    assert "--- exception ---" in log.read_text()
    assert not (Path("runs") / folder).exists()


def test_missing_onnxruntime_names_the_extra(cli, monkeypatch):
    hide_module(monkeypatch, "onnxruntime")
    done = cli("run", "--backend", "ort_fp32", "--model", "tests.tiny_models:conv_net", *FAST)
    assert_one_line_error(done, "ort_fp32", "onnxruntime", ".[onnx]")
    assert_nothing_written()


def test_missing_torchao_and_modelopt_name_their_extras(monkeypatch):
    from profiler.collect import backends

    hide_module(monkeypatch, "torchao")
    hide_module(monkeypatch, "modelopt")
    assert ".[int8]" in backends.get("inductor_int8").missing()
    assert ".[fp8]" in backends.get("ttrt_fp8").missing()


# ---- which Linears run INT8 ---------------------------------------------------------------------


def test_int8_plan_keeps_small_row_heads_in_floating_point():
    from tests.tiny_models import token_classifier

    model, inputs = token_classifier(batch_size=12, seq_len=8)
    layers = quantized.observe_layers(model.eval(), [inputs])
    plan = quantized.int8_plan(layers)
    assert plan["int8_layers"] == ["up", "down"]  # 12 x 8 = 96 rows each
    assert plan["fp_layers"] == {"head": "12 rows: torch._int_mm needs more than 16"}
    up, head = layers["up"], layers["head"]
    assert up.flops == 2 * 96 * 32 * 64 and head.flops == 2 * 12 * 32 * 4
    assert plan["int8_linear_flop_share"] == pytest.approx(
        (layers["up"].flops + layers["down"].flops) / sum(s.flops for s in layers.values())
    )
    assert plan["conv_flop_share"] == 0


def test_int8_plan_of_a_conv_net_says_none_ran_int8():
    from tests.tiny_models import conv_net

    model, inputs = conv_net(batch_size=32)
    plan = quantized.int8_plan(quantized.observe_layers(model.eval(), [inputs]))
    # the Linear(8, 4) head: 4 outputs is no multiple of 8; convolutions are never quantized
    assert plan["int8_layers"] == [] and "out_features 4" in plan["fp_layers"]["5"]
    assert plan["int8_flop_share"] == 0 and plan["conv_flop_share"] > 0.99


# ---- --calib-data ------------------------------------------------------------------------------

EXAMPLE = (torch.randn(2, 8, 32),)


def test_calibration_data_one_batch_or_many(tmp_path):
    path = tmp_path / "one.pt"
    torch.save(torch.randn(2, 8, 32), path)
    assert len(quantized.load_calibration_data(path, EXAMPLE)) == 1
    torch.save((torch.randn(5, 2, 8, 32),), path)
    batches = quantized.load_calibration_data(path, EXAMPLE)
    assert len(batches) == 5 and batches[0][0].shape == (2, 8, 32)


@pytest.mark.parametrize(
    "content,fragment",
    [
        (None, "no such file"),
        (b"not a tensor file at all", "is not a tensor file"),
        ({"x": torch.randn(2, 8, 32)}, "holds a dict, not a tensor"),
        (torch.randn(2, 8, 16), "expected [2, 8, 32] or [N, 2, 8, 32]"),
        (torch.randint(0, 5, (2, 8, 32)), "dtype kind differs"),
        ((torch.randn(2, 8, 32), torch.randn(2, 8, 32)), "holds 2 tensor(s); the model takes 1"),
    ],
)
def test_bad_calibration_data_is_one_line(tmp_path, content, fragment):
    path = tmp_path / "calib.pt"
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        torch.save(content, path)
    with pytest.raises(UserError) as error:
        quantized.load_calibration_data(path, EXAMPLE)
    assert fragment in str(error.value) and "\n" not in str(error.value)


@pytest.mark.skipif(TORCHAO_MISSING, reason="torchao is not installed (pip install -e '.[int8]')")
def test_bad_calib_data_through_the_cli_writes_nothing(cli, tmp_path):
    bad = tmp_path / "calib.pt"
    torch.save(torch.randn(3, 3), bad)
    done = cli(
        "run",
        "--backend",
        "inductor_int8",
        "--model",
        "tests.tiny_models:token_classifier",
        *FAST,
        "--calib-data",
        str(bad),
    )
    assert_one_line_error(done, "--calib-data", "expected", progress_before=True)
    assert_nothing_written()


# ---- inductor_int8 -----------------------------------------------------------------------------


@pytest.mark.skipif(TORCHAO_MISSING, reason="torchao is not installed (pip install -e '.[int8]')")
def test_inductor_int8_static_calibration_end_to_end(cli, tmp_path):
    data = tmp_path / "calib.pt"
    torch.save(torch.randn(4, 2, 16, 32), data)
    done = cli(
        "run",
        "--backend",
        "inductor_int8",
        "--model",
        "tests.tiny_models:token_classifier",
        "--bs",
        "2",
        "--seq-len",
        "16",
        *FAST,
        "--calib-data",
        str(data),
        "--json",
    )
    assert done.code == 0, done.stderr
    result = json.loads(done.stdout)
    notes = result["backend"]["notes"]
    assert result["backend"]["precision"] == "int8"
    assert notes["int8_layers"] == ["up", "down"] and list(notes["fp_layers"]) == ["head"]
    assert notes["calibration"] == str(data) and notes["calibration_s"] > 0
    assert notes["int8_scheme"].startswith("static per-tensor")
    assert 0.9 < notes["int8_linear_flop_share"] < 1
    # INT8 costs accuracy, but not the answer
    assert 0 < result["numerics"]["rel_l2_error"] < 0.05
    assert result["numerics"]["top1_agreement"] == 1


@pytest.mark.skipif(TORCHAO_MISSING, reason="torchao is not installed (pip install -e '.[int8]')")
def test_quantization_failure_is_one_line_and_keeps_the_log(monkeypatch, tmp_path):
    from tests.tiny_models import token_classifier

    def explode(*args, **kwargs):
        raise RuntimeError("quantize_ refused this layer\nsecond line")

    monkeypatch.setattr(quantized, "quantize_with_torchao", explode)
    config = RunConfig(
        backend="inductor_int8",
        model="tests.tiny_models:token_classifier",
        batch_size=2,
        runs_dir=tmp_path / "runs",
        calib_batches=2,
    )
    model, inputs = token_classifier(batch_size=2, seq_len=16)
    with pytest.raises(UserError) as error:
        quantized._prepare_inductor_int8(model.eval(), inputs, config, torch.device("cpu"))
    log = tmp_path / "runs" / f"{config.run_name}.failed" / quantized.CALIBRATION_LOG
    message = str(error.value)
    assert "\n" not in message and "quantize_ refused this layer" in message and str(log) in message
    assert "calibration on 2 random batches" not in log.read_text()  # it failed before that line
    assert "RuntimeError" in log.read_text()


# ---- ttrt_int8 / ttrt_fp8 (ModelOpt -> Torch-TensorRT), with stand-ins ------------------------


def test_fp8_below_compute_capability_8_9_is_refused():
    assert quantized.fp8_refusal((8, 0), "NVIDIA A100") == (
        "ttrt_fp8 needs FP8 Tensor Cores (compute capability 8.9 or newer); NVIDIA A100 is 8.0"
    )
    assert quantized.fp8_refusal((8, 9), "NVIDIA L4") is None
    assert quantized.fp8_refusal((9, 0), "NVIDIA H100") is None


def test_ttrt_int8_on_tensorrt_rtx_is_refused_in_one_line(monkeypatch):
    from profiler.collect.backends import tensorrt as ttrt

    monkeypatch.setattr(
        ttrt,
        "detect_flavour",
        lambda: ttrt.Flavour("tensorrt-rtx", "torch-tensorrt-rtx", "2.11.0", "tensorrt_rtx"),
    )
    with pytest.raises(UserError, match="TensorRT-RTX does not support int8 activation"):
        quantized._prepare_modelopt(
            None, (), RunConfig(backend="ttrt_int8"), torch.device("cpu"), "int8"
        )


@pytest.fixture
def stand_ins():
    calls = {"calibrated_batches": 0}

    def quantize(model, config, forward_loop):
        calls["config"] = config
        forward_loop(model)
        calls["calibrated"] = calls["calibrated_batches"]  # before export traces the model
        return model

    def forward_counter(module, args, output):
        calls["calibrated_batches"] += 1

    def compile(exported, **options):
        calls["compile"] = options
        return exported.module()

    mtq = types.SimpleNamespace(
        INT8_DEFAULT_CFG="int8-cfg", FP8_DEFAULT_CFG="fp8-cfg", quantize=quantize
    )
    torch_tensorrt = types.SimpleNamespace(dynamo=types.SimpleNamespace(compile=compile))
    return calls, mtq, torch_tensorrt, forward_counter


@pytest.mark.parametrize("precision", ["int8", "fp8"])
def test_modelopt_flow_calibrates_then_builds_strongly_typed(stand_ins, precision):
    from tests.tiny_models import token_classifier

    calls, mtq, torch_tensorrt, counter = stand_ins
    model, inputs = token_classifier(batch_size=2, seq_len=16)
    model.eval().register_forward_hook(counter)
    batches = quantized.random_batches(inputs, 3, seed=0)
    compiled, timing = quantized.modelopt_quantize_and_compile(
        model, inputs, batches, RunConfig(), precision, mtq, contextlib.nullcontext, torch_tensorrt
    )
    assert calls["config"] == f"{precision}-cfg" and calls["calibrated"] == 3
    assert calls["compile"]["use_explicit_typing"] is True
    assert calls["compile"]["disable_tf32"] is True
    assert timing["calibration_s"] > 0 and timing["compile_s"] > 0
    assert timing["quant_config"] == f"mtq.{precision.upper()}_DEFAULT_CFG"
    assert torch.allclose(compiled(*inputs), model(*inputs))
    check = timing["engine_check"]
    assert check["engine_non_finite"] == 0 and check["engine_vs_fake_quant_rel_l2"] == 0
    assert quantized.engine_warning(check, f"ttrt_{precision}") is None


def test_an_engine_that_makes_nan_where_the_fake_quantized_model_does_not_is_named():
    finite = torch.ones(2, 3)
    broken = torch.full((2, 3), float("nan"))
    engine = quantized.engine_check(broken, finite)
    assert engine == {"outputs": 6, "engine_non_finite": 6, "fake_quant_non_finite": 0}
    said = quantized.engine_warning(engine, "ttrt_fp8")
    assert "TensorRT engine gives 6 non-finite outputs of 6" in said
    assert "engine is at fault" in said
    both = quantized.engine_check((broken,), (broken,))
    assert "calibration or its scales are at fault" in quantized.engine_warning(both, "ttrt_fp8")
    close = quantized.engine_check(finite * 1.1, finite)
    assert abs(close["engine_vs_fake_quant_rel_l2"] - 0.1) < 1e-6
    assert quantized.engine_warning(close, "ttrt_fp8") is None


def test_modelopt_failure_is_one_line_and_keeps_the_log(stand_ins, monkeypatch, tmp_path):
    from profiler.collect.backends import tensorrt as ttrt
    from tests.tiny_models import token_classifier

    _, mtq, torch_tensorrt, _ = stand_ins

    def failing_quantize(model, config, forward_loop):
        raise RuntimeError("calibration diverged\nmore")

    mtq.quantize = failing_quantize
    quantization = types.ModuleType("modelopt.torch.quantization")
    quantization.__dict__.update(vars(mtq))
    utils = types.ModuleType("modelopt.torch.quantization.utils")
    utils.export_torch_mode = contextlib.nullcontext
    for name, module in (
        ("modelopt", types.ModuleType("modelopt")),
        ("modelopt.torch", types.ModuleType("modelopt.torch")),
        ("modelopt.torch.quantization", quantization),
        ("modelopt.torch.quantization.utils", utils),
        ("torch_tensorrt", torch_tensorrt),
    ):
        monkeypatch.setitem(sys.modules, name, module)
    monkeypatch.setattr(
        ttrt,
        "detect_flavour",
        lambda: ttrt.Flavour("tensorrt", "torch-tensorrt", "2.11.0", "tensorrt"),
    )
    config = RunConfig(backend="ttrt_int8", batch_size=2, runs_dir=tmp_path / "runs")
    model, inputs = token_classifier(batch_size=2, seq_len=16)
    with pytest.raises(UserError) as error:
        quantized._prepare_modelopt(model.eval(), inputs, config, torch.device("cpu"), "int8")
    log = tmp_path / "runs" / "ttrt_int8_bs2.failed" / "tensorrt_build.log"
    assert "\n" not in str(error.value) and "calibration diverged" in str(error.value)
    assert "ModelOpt PTQ or TensorRT build failed" in str(error.value)
    assert "RuntimeError" in log.read_text()


def test_negative_calib_batches_is_refused():
    with pytest.raises(UserError, match="--calib-batches must be 0 or more"):
        RunConfig(calib_batches=-1)


def test_native_stderr_keeps_what_the_cpp_logger_writes(capfd):
    with ort_backend.native_stderr() as captured:
        import os

        os.write(2, b"[E:onnxruntime:Default, cudnn_fe_call.cc:39 Fn] not on the console\n")
    assert "not on the console" in captured[0]
    assert "not on the console" not in capfd.readouterr().err
