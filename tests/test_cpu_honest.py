"""A CPU run gets CPU output: no GPU-only advice, no empty GPU tables, no roofline without a
roof, and `next:` hints that name runs that exist or backends that run on a CPU."""

import os
import shutil
import subprocess
import sys

import pytest

from tests.conftest import FIXTURES, ROOT

TINY = [
    "--model",
    "tests.tiny_models:conv_net",
    "--iters",
    "2",
    "--timed-warmup",
    "0",
    "--active",
    "1",
]


def profile(cwd, *args, cache):
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "COLUMNS": "120",
        "INFER_PROFILER_CACHE": str(cache),
    }
    return subprocess.run(
        [sys.executable, str(ROOT / "profile.py"), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )


@pytest.fixture(scope="module")
def cpu_run(tmp_path_factory):
    """One tiny CPU run: (its folder, run's stdout, run's stderr, the cache)."""
    where = tmp_path_factory.mktemp("cpu")
    cache = tmp_path_factory.mktemp("cache")
    done = profile(where, "run", "--backend", "pytorch_fp32", "--bs", "2", *TINY, cache=cache)
    assert done.returncode == 0, done.stderr
    return where, done.stdout, done.stderr, cache


def next_hints(stdout: str) -> list[str]:
    return [
        line.removeprefix("next: ") for line in stdout.splitlines() if line.startswith("next: ")
    ]


def test_run_hints_name_this_runs_folder_and_a_cpu_backend(cpu_run):
    where, stdout, _, cache = cpu_run
    hints = next_hints(stdout)
    assert hints and not any("ttrt" in h for h in hints), hints
    compare = [h for h in hints if " compare " in h]
    assert compare == [
        "python profile.py compare runs/pytorch_fp32_bs2_conv_net "
        "runs/torchscript_fp32_bs2_conv_net   (after running --backend "
        "torchscript_fp32)"
    ]
    # once the other run exists, the hint names it without the "after running"
    twin = where / "runs" / "torchscript_fp32_bs2_conv_net"
    shutil.copytree(where / "runs" / "pytorch_fp32_bs2_conv_net", twin)
    try:
        from profiler.analysis.result_analysis import next_steps
        from profiler.runs.result import read_result

        os.chdir(where)
        result = read_result(where / "runs" / "pytorch_fp32_bs2_conv_net" / "result.json")
        assert next_steps(result)[-1].endswith("runs/torchscript_fp32_bs2_conv_net")
    finally:
        os.chdir(ROOT)
        shutil.rmtree(twin)


def test_summarize_a_cpu_run_gives_no_gpu_advice_tables_or_roof(cpu_run, cli, monkeypatch):
    where, _, _, _ = cpu_run
    monkeypatch.chdir(where)
    monkeypatch.setenv("COLUMNS", "120")
    done = cli("summarize", "runs/pytorch_fp32_bs2_conv_net")
    assert done.code == 0, done.stderr
    out = done.stdout
    assert "CPU-only" in out and "CPU operators by total CPU time" in out
    for gpu_only in (
        "Kernels by total time",
        "Kernel launch configuration",
        "Kernel time by category",
        "launch-bound",
        "CUDA graphs",
        "GPU idle",
    ):
        assert gpu_only not in out, gpu_only
    roofline = next(line for line in out.splitlines() if "Roofline" in line)
    assert "none drawn" in roofline and "n/a" not in roofline


def test_a_sweep_cells_hint_names_the_cell_folder():
    # sweep cells are named <backend>_bs<N> inside the sweep folder, without the model
    from profiler.analysis.result_analysis import next_steps
    from profiler.runs.result import read_result

    cell = FIXTURES / "h100_engines" / "runs" / "engines_distilbert" / "inductor_int8_bs12"
    hint = next_steps(read_result(cell / "result.json"))[-1]
    assert "runs/engines_distilbert/ttrt_fp16_bs12 " in hint  # a GPU run: TensorRT is next


def test_launch_bound_needs_gpu_work():
    from profiler.analysis.advice import Evidence, advise

    cpu = Evidence(
        backend="pytorch_fp32",
        precision="fp32",
        p50_ms=150.0,
        step_us=183e3,
        gpu_busy_us=0.0,
        kernel_us=0.0,
    )
    assert not [a for a in advise(cpu) if a.rule == "launch-bound"]
    gpu = Evidence(
        backend="pytorch_fp32",
        precision="fp32",
        p50_ms=5.0,
        step_us=9e3,
        gpu_busy_us=1e3,
        kernel_us=1e3,
    )
    assert [a for a in advise(gpu) if a.rule == "launch-bound"]


def test_cpu_run_stderr_has_no_kineto_noise(cpu_run):
    _, _, stderr, _ = cpu_run
    assert "USDT:" not in stderr and "gpuGetDeviceCount" not in stderr, stderr
    assert "timed 2 iterations" in stderr  # the run's own progress lines stay


def test_kineto_quiet_drops_only_kinetos_lines(capfd):
    from profiler.collect.device import kineto_quiet

    with kineto_quiet(True):
        os.write(
            2, b"USDT:2026-11-24 13:02:09 1:1 SyncActivityProfilerHandler.cpp:39] profiler_start\n"
        )
        os.write(
            2,
            b"ERROR:2026-11-24 13:02:09 1:1 DeviceProperties.cpp:56] "
            b"gpuGetDeviceCount failed with code 35\n",
        )
        os.write(2, b"a C++ warning of the model\n")
        print("python's stderr", file=sys.stderr)
    err = capfd.readouterr().err
    assert "USDT" not in err and "gpuGetDeviceCount" not in err
    assert "a C++ warning of the model" in err and "python's stderr" in err
