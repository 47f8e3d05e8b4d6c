"""A real run on the CPU, end to end: trace, result.json, latency.csv."""

import gzip
import json
from pathlib import Path

import pytest

TINY = [
    "--model",
    "resnet18",
    "--image-size",
    "32",
    "--bs",
    "2",
    "--iters",
    "7",
    "--timed-warmup",
    "2",
]


@pytest.fixture(scope="module")
def resnet18_run(tmp_path_factory):
    from typer.testing import CliRunner

    from profiler.cli.app import app

    workdir = tmp_path_factory.mktemp("run")
    result = CliRunner().invoke(
        app,
        [
            "run",
            *TINY,
            "--active",
            "2",
            "--json",
            "--runs-dir",
            str(workdir / "runs"),
            "--tb-dir",
            str(workdir / "tb_logs"),
        ],
    )
    assert result.exit_code == 0, result.stderr
    return workdir, json.loads(result.stdout)


def _events(trace_path: Path) -> list[dict]:
    opener = gzip.open if trace_path.suffix == ".gz" else open
    with opener(trace_path, "rt") as handle:
        return json.load(handle)["traceEvents"]


def test_trace_has_profiler_steps_and_inference_spans(resnet18_run):
    workdir, result = resnet18_run
    files = [Path(f) for f in result["trace"]["files"]]
    assert len(files) == 1 and files[0].exists()
    assert files[0].parent == workdir / "tb_logs" / "pytorch_fp32_bs2_resnet18"
    assert files[0].name.startswith("resnet18.") and files[0].name.endswith(".pt.trace.json.gz")
    events = _events(files[0])
    steps = {e["name"] for e in events if e.get("name", "").startswith("ProfilerStep#")}
    spans = [e for e in events if e.get("name") == "inference_step" and e.get("ph") == "X"]
    # schedule wait=1 warmup=1 active=2: the two active steps are recorded, each with its span
    assert steps == {"ProfilerStep#2", "ProfilerStep#3"}
    assert len(spans) == 2
    assert any(e.get("cat") == "cpu_op" and e["name"] == "aten::conv2d" for e in events)


def test_result_json_has_statistics_and_metadata(resnet18_run):
    workdir, result = resnet18_run
    run_dir = workdir / "runs" / "pytorch_fp32_bs2_resnet18"
    on_disk = json.loads((run_dir / "result.json").read_text())
    assert on_disk["run_name"] == result["run_name"] == "pytorch_fp32_bs2_resnet18"
    timing = on_disk["timing"]
    assert timing["iters"] == 7 and timing["timer"] == "perf_counter"
    assert (
        0
        < timing["min_ms"]
        <= timing["p50_ms"]
        <= timing["p90_ms"]
        <= timing["p95_ms"]
        <= timing["p99_ms"]
        <= timing["max_ms"]
    )
    assert timing["min_ms"] <= timing["mean_ms"] <= timing["max_ms"]
    assert timing["throughput_samples_per_s"] == pytest.approx(2 * 1000 / timing["mean_ms"])
    assert timing["prepare_s"] >= 0 and timing["first_call_s"] > 0
    assert on_disk["precision"] == {
        "tf32": False,
        "matmul_allow_tf32": False,
        "cudnn_allow_tf32": False,
        "cudnn_benchmark": True,
    }
    assert on_disk["config"]["seed"] == 0 and on_disk["model"] == "resnet18"
    env = on_disk["environment"]
    assert env["torch"].startswith("2.") and env["gpu"] is None
    assert env["command_line"]
    assert on_disk["output"]["finite"] is True and on_disk["output"]["shape"] == [2, 1000]
    assert on_disk["profile"]["activities"] == ["CPU"]


def test_latency_csv_has_one_row_per_iteration(resnet18_run):
    workdir, result = resnet18_run
    run_dir = workdir / "runs" / "pytorch_fp32_bs2_resnet18"
    lines = (run_dir / "latency.csv").read_text().splitlines()
    assert lines[0] == "iteration,latency_ms"
    assert len(lines) == 1 + 7
    values = sorted(float(line.split(",")[1]) for line in lines[1:])
    assert values[0] == pytest.approx(result["timing"]["min_ms"], rel=1e-5)
    assert values[-1] == pytest.approx(result["timing"]["max_ms"], rel=1e-5)


def test_nothing_left_in_staging(resnet18_run):
    workdir, _ = resnet18_run
    assert sorted(p.name for p in (workdir / "runs").iterdir()) == ["pytorch_fp32_bs2_resnet18"]
    assert sorted(p.name for p in (workdir / "tb_logs").iterdir()) == ["pytorch_fp32_bs2_resnet18"]


def test_rerun_replaces_the_run_folder(cli):
    args = [
        "run",
        "--model",
        "tests.tiny_models:conv_net",
        "--bs",
        "2",
        "--iters",
        "3",
        "--timed-warmup",
        "0",
        "--active",
        "1",
        "--name",
        "tiny",
    ]
    assert cli(*args).code == 0
    assert cli(*args, "--repeat", "2").code == 0
    run = json.loads(Path("runs/pytorch_fp32_bs2_tiny/result.json").read_text())
    # repeat=2 writes two trace files; the first run's single file is gone with its folder
    assert len(run["trace"]["files"]) == 2
    assert len(list(Path("tb_logs/pytorch_fp32_bs2_tiny").glob("*.pt.trace.json*"))) == 2
    assert sorted(p.name for p in Path("runs").iterdir()) == ["pytorch_fp32_bs2_tiny"]


@pytest.mark.parametrize("backend", ["pytorch_bf16", "torchscript_fp32"])
def test_other_cpu_backends_run(cli, backend):
    done = cli(
        "run",
        "--backend",
        backend,
        "--model",
        "tests.tiny_models:conv_net",
        "--iters",
        "2",
        "--timed-warmup",
        "0",
        "--active",
        "1",
        "--json",
    )
    assert done.code == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["backend"]["precision"] == backend.split("_")[1]
    if backend == "pytorch_bf16":
        assert result["output"]["dtype"] == "bfloat16"
        # conv nets in reduced precision run channels_last, and the metadata says so
        assert result["backend"]["notes"]["memory_format"] == "channels_last"


def test_tf32_flag_is_recorded(cli):
    done = cli(
        "run",
        "--model",
        "tests.tiny_models:conv_net",
        "--iters",
        "2",
        "--timed-warmup",
        "0",
        "--active",
        "1",
        "--tf32",
        "--json",
    )
    assert done.code == 0
    assert json.loads(done.stdout)["precision"]["cudnn_allow_tf32"] is True


def test_transformer_model_can_be_captured_by_torch_export():
    """Torch-TensorRT's dynamo path starts from torch.export: the translation model must export
    (it did not while nn.Transformer checked its causal mask with a data-dependent branch)."""
    import torch

    from profiler.collect.models import build
    from profiler.runs.config import RunConfig

    model, inputs = build(RunConfig(model="transformer", batch_size=2, seq_len=8))
    exported = torch.export.export(model, inputs)
    with torch.no_grad():
        assert torch.allclose(exported.module()(*inputs), model(*inputs), atol=1e-5)


def test_result_json_records_the_gpu_state_or_why_not(resnet18_run):
    """On a CPU run the timed window records no GPU state, says why, and keeps the host load."""
    workdir, result = resnet18_run
    run_dir = workdir / "runs" / "pytorch_fp32_bs2_resnet18"
    on_disk = json.loads((run_dir / "result.json").read_text())
    state = on_disk["gpu_state"]
    assert state == result["gpu_state"]
    assert state["not_recorded"] == "no GPU" and state["before"] is None
    assert len(state["load_average"]) == 3 and state["cpus"] >= 1
