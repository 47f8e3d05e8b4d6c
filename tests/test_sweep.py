"""The sweep command on the CPU: cells in a worker process, failures recorded, --resume,
Ctrl-C, bad input; and plots of a sweep (crashes, timeouts and GPUs: test_sweep_workers.py)."""

import csv
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import ROOT, stop_sweep_when

FAST = ["--iters", "2", "--timed-warmup", "0", "--active", "1"]
# bs 3 runs out of (simulated) CUDA memory: tests.tiny_models.oom_above_2
GRID = [
    "--backends",
    "pytorch_fp32,pytorch_bf16",
    "--bs",
    "1,2,3",
    "--model",
    "tests.tiny_models:oom_above_2",
    *FAST,
    "--name",
    "grid",
    "--processes",
    "2",
]


def sweep_cli(*args, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    env = dict(os.environ, COLUMNS="200")
    env.pop("PYTHONPATH", None)
    return subprocess.run(
        [sys.executable, str(ROOT / "profile.py"), "sweep", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


@pytest.fixture(scope="module")
def grid(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("sweep")
    done = sweep_cli(*GRID, cwd=workdir)
    return workdir, done


def _manifest(workdir: Path, name: str = "grid") -> dict:
    return json.loads((workdir / "runs" / name / "sweep.json").read_text())


def test_sweep_writes_cells_tables_and_manifest(grid):
    workdir, done = grid
    # some cells failed (OOM), at least one finished: exit 0 with a warning naming the others
    assert done.returncode == 0, done.stderr
    assert "warning: 2 of 6 cells did not finish" in done.stderr
    assert "pytorch_fp32_bs3_oom_above_2 (oom)" in done.stderr and "sweep took" in done.stderr
    sweep = workdir / "runs" / "grid"
    # a cell's folder is the run's own name: <backend>_bs<N>_<model function>
    for cell in (
        f"{backend}_bs{n}_oom_above_2"
        for backend in ("pytorch_fp32", "pytorch_bf16")
        for n in (1, 2)
    ):
        result = json.loads((sweep / cell / "result.json").read_text())
        assert result["run_name"] == cell
        traces = list((workdir / "tb_logs" / "grid" / cell).glob("*.pt.trace.json.gz"))
        assert len(traces) == 1
    assert not (sweep / "pytorch_fp32_bs3_oom_above_2").exists()
    manifest = _manifest(workdir)
    assert manifest["baseline"] == "pytorch_fp32" and manifest["batch_sizes"] == [1, 2, 3]
    assert manifest["options"]["iters"] == 2
    oom = manifest["cells"]["pytorch_bf16_bs3_oom_above_2"]
    assert oom["status"] == "oom" and oom["exit_code"] == 2 and oom["kind"] == "cuda-oom"
    assert "CUDA out of memory at batch size 3" in oom["reason"]
    assert oom["elapsed_s"] > 0 and (sweep / oom["log"]).is_file()
    with open(sweep / "benchmark.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert list(rows[0]) == [
        "model",
        "device",
        "backend",
        "bs",
        "mean_ms",
        "p50_ms",
        "p90_ms",
        "p99_ms",
        "gpu_compute_ms",
        "enqueue_ms",
        "bound",
        "throughput_per_s",
        "speedup",
        "speedup_low",
        "speedup_high",
        "verdict",
        "gpu_speedup",
        "gpu_speedup_low",
        "gpu_speedup_high",
        "gpu_verdict",
        "verdict_note",
        "processes",
        "gpus",
        "baseline",
        "ready_s",
        "compile_s",
        "compile_what",
        "rel_l2_error",
        "tensor_core_pct",
        "gpu_util_pct",
        "cv_pct",
        "noise",
        "peak_allocated_mib",
        "peak_reserved_mib",
        "engine_mib",
        "tflops",
        "pct_peak_compute",
        "gbs",
        "pct_peak_bandwidth",
        "flop_per_byte",
        "ttft_ms",
        "token_p50_ms",
        "token_p99_ms",
        "tokens_per_s",
        "token_agreement",
        "status",
        "reason",
        "gpu",
        "node",
        "elapsed_s",
        "wall_s",
        "imports_s",
        "build_s",
        "flops_s",
        "prepare_s",
        "first_call_s",
        "graph_capture_s",
        "warm_up_s",
        "timed_s",
        "gpu_compute_s",
        "untraced_call_s",
        "profile_s",
        "trace_write_s",
        "after_windows_s",
        "numerics_s",
        "repeat_runs_s",
        "write_s",
    ]
    by_cell = {(r["backend"], int(r["bs"])): r for r in rows}
    # where each finished cell's seconds went: every phase that ran, none longer than the run
    ok = by_cell[("pytorch_bf16", 2)]
    phase_columns = list(rows[0])[list(rows[0]).index("wall_s") + 1 :]
    ran = {k: float(ok[k]) for k in phase_columns if ok[k] != ""}
    assert set(ran) == {
        "imports_s",
        "build_s",
        "flops_s",
        "prepare_s",
        "first_call_s",
        "warm_up_s",
        "timed_s",
        "profile_s",
        "trace_write_s",
        "numerics_s",
        "write_s",
    }
    assert all(v >= 0 for v in ran.values()) and ran["imports_s"] > 0
    assert sum(ran.values()) <= float(ok["wall_s"]) <= float(ok["elapsed_s"])
    assert by_cell[("pytorch_bf16", 3)]["wall_s"] == ""  # the cell that ran out of memory
    # the roofline of the timed p50 from the FLOPs the run counted; no GPU, so no ceilings
    assert float(by_cell[("pytorch_fp32", 2)]["tflops"]) > 0
    assert float(by_cell[("pytorch_fp32", 2)]["flop_per_byte"]) > 0
    assert by_cell[("pytorch_fp32", 2)]["pct_peak_compute"] == ""
    assert len(by_cell) == 6
    for bs in (1, 2):
        base, bf16 = by_cell[("pytorch_fp32", bs)], by_cell[("pytorch_bf16", bs)]
        assert float(base["speedup"]) == pytest.approx(1.0)
        assert float(bf16["speedup"]) == pytest.approx(
            float(base["p50_ms"]) / float(bf16["p50_ms"]), rel=1e-4
        )
        assert base["rel_l2_error"] == "" and float(bf16["rel_l2_error"]) > 0
        assert base["device"] == "CPU" and base["status"] == "ok"
        assert float(base["cv_pct"]) >= 0 and base["peak_allocated_mib"] == ""
        # --processes 2: two more windows of every finished cell, in rounds after the cells
        # (the cell's own run is kept too, as process 0, and pairs with none)
        assert base["processes"] == bf16["processes"] == "3" and base["verdict"] == "baseline"
        assert bf16["verdict"] in ("faster", "slower", "same", "undecided")
        assert float(bf16["speedup_low"]) <= float(bf16["speedup"]) <= float(bf16["speedup_high"])
        samples = (sweep / f"pytorch_bf16_bs{bs}_oom_above_2" / "processes.csv").read_text()
        assert {line.split(",")[0] for line in samples.splitlines()[1:]} == {"0", "1", "2"}
    assert "round 1: a fresh process times" in done.stderr
    assert "round 2: a fresh process times" in done.stderr
    assert "round 3:" not in done.stderr
    assert by_cell[("pytorch_fp32", 3)]["status"] == "oom"
    assert by_cell[("pytorch_fp32", 3)]["speedup"] == ""
    md = (sweep / "benchmark.md").read_text()
    assert "| pytorch_bf16 | 2 |" in md and "## Cells that did not finish" in md
    assert "pytorch_fp32" in done.stdout and "oom" in done.stdout  # the rich table


def test_resume_skips_finished_cells_and_json_prints_the_table(grid):
    workdir, _ = grid
    result = workdir / "runs" / "grid" / "pytorch_fp32_bs1_oom_above_2" / "result.json"
    before = result.stat().st_mtime_ns
    done = sweep_cli(*GRID, "--resume", "--json", cwd=workdir)
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("skipped (--resume)") == 4
    assert "(2 cell(s) run, 4 skipped)" in done.stderr  # the two OOM cells are tried again
    assert result.stat().st_mtime_ns == before  # nor re-sampled: it has its 2 rounds
    assert _manifest(workdir)["cells"]["pytorch_fp32_bs3_oom_above_2"]["status"] == "oom"
    # --json: the table as records on stdout (progress on stderr)
    data = json.loads(done.stdout)
    assert data["baseline"] == "pytorch_fp32" and len(data["cells"]) == 6
    ok = [c for c in data["cells"] if c["status"] == "ok"]
    assert all(isinstance(c["bs"], int) and c["peak_allocated_mib"] is None for c in ok)
    assert all(c["cv_pct"] >= 0 and c["processes"] == 3 for c in ok)


def test_plots_of_a_cpu_sweep(grid, tmp_path):
    workdir, _ = grid
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "profile.py"),
            "plot",
            "runs/grid",
            "--out",
            str(tmp_path),
            "--json",
        ],
        cwd=workdir,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert sorted(Path(p).name for p in json.loads(done.stdout)["written"]) == [
        "latency.png",
        "roofline.png",
        "speedup.png",
        "throughput.png",
    ]
    for name in ("latency.png", "speedup.png", "throughput.png"):
        data = (tmp_path / name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000, name
    # a CPU sweep has no GPU kernels: no category figure, and we say so
    assert not (tmp_path / "categories.png").exists() and "no GPU kernels" in done.stderr
    # cells are named <backend>_bs<N>_<model>: every finished one is on the roofline chart
    assert (tmp_path / "roofline.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_report_of_a_cpu_sweep_lists_every_finished_cell(grid):
    workdir, _ = grid
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    done = subprocess.run(
        [sys.executable, str(ROOT / "profile.py"), "report", "grid"],
        cwd=workdir,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    text = (workdir / "runs" / "grid" / "report.html").read_text()
    assert "Roofline and advice per cell" in text
    for backend in ("pytorch_fp32", "pytorch_bf16"):
        for bs in (1, 2):
            assert re.search(f"<td[^>]*>{backend} bs{bs}</td>", text), (backend, bs)
    assert "pytorch_fp32 bs3" not in text  # out of memory: not a finished cell


def test_compare_two_cells_of_a_sweep(grid):
    workdir, _ = grid
    env = dict(os.environ, COLUMNS="200")
    env.pop("PYTHONPATH", None)
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "profile.py"),
            "compare",
            "grid/pytorch_fp32_bs2_oom_above_2",
            "grid/pytorch_bf16_bs2_oom_above_2",
            "--view",
            "full",
        ],
        cwd=workdir,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "timed p50 latency (result.json)" in done.stdout
    assert "config.backend" in done.stdout and "latency (what a caller waits): B/A" in done.stdout
    # the sweep's --processes 2: two rounds and each cell's own run
    assert "over 3 vs 3 processes" in done.stdout


def test_compare_times_both_configs_again_interleaved(grid, tmp_path):
    workdir, _ = grid
    env = dict(os.environ, COLUMNS="200")
    env.pop("PYTHONPATH", None)
    cells = ["grid/pytorch_fp32_bs1_oom_above_2", "grid/pytorch_bf16_bs1_oom_above_2"]
    before = [(workdir / "runs" / c / "processes.csv").read_text() for c in cells]
    kept = tmp_path / "kept"

    def compare(*args):
        return subprocess.run(
            [sys.executable, str(ROOT / "profile.py"), "compare", *cells, *args],
            cwd=workdir,
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
        )

    done = compare("--processes", "1", "--json", "--out", str(kept))
    assert done.returncode == 0, done.stderr
    verdict = json.loads(done.stdout)["timed"]["verdict"]
    # one fresh process times A and B in turn (more: more rounds, tests/test_processes.py)
    assert verdict["processes_a"] == verdict["processes_b"] == 1
    assert verdict["verdict"] in ("faster", "slower", "undecided")
    assert "timing A and B again: 1 fresh process each, interleaved" in done.stderr
    assert done.stderr.count("a fresh process times") == 1
    # the run folders are not changed
    assert [(workdir / "runs" / c / "processes.csv").read_text() for c in cells] == before
    # the windows are kept, and judged again from there without timing
    assert f"kept the windows in {kept}" in done.stderr
    again = compare("--samples", str(kept), "--json")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["timed"]["verdict"] == verdict
    assert "a fresh process times" not in again.stderr and "not timed again" in again.stderr
    for args, fragment in (
        (("--samples", str(tmp_path / "nothing")), "no processes_A.csv there"),
        (("--samples", str(kept), "--processes", "2"), "leave out --processes"),
    ):
        bad = compare(*args)
        assert bad.returncode == 2 and fragment in bad.stderr, bad.stderr
        assert bad.stderr.strip().splitlines()[-1].startswith("error: ")


def test_all_cells_failing_exits_1(tmp_path):
    done = sweep_cli(
        "--backends",
        "pytorch_fp32",
        "--bs",
        "2",
        "--model",
        "tests.tiny_models:failing",
        *FAST,
        cwd=tmp_path,
    )
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1].startswith("error: all 1 cells failed")
    cells = _manifest(tmp_path, "sweep_tests.tiny_models_failing")["cells"]
    cell = cells["pytorch_fp32_bs2_failing"]
    # the user's model failing is the cell's one error line, naming the function
    assert cell["status"] == "failed" and cell["exit_code"] == 2
    assert cell["reason"].startswith(
        "--model tests.tiny_models:failing failed: RuntimeError: "
        "this model fails on purpose (at tiny_models.py:"
    )


def test_ctrl_c_keeps_finished_cells(tmp_path):
    # tests.tiny_models:slow (0.3 s a call): cell 2 still runs when the signal comes
    def second_cell_running(cells: dict) -> bool:
        return (
            cells.get("pytorch_fp32_bs1_slow", {}).get("status") == "ok"
            and cells.get("pytorch_fp32_bs2_slow", {}).get("status") == "running"
        )

    code, stderr, cells = stop_sweep_when(
        ["--backends", "pytorch_fp32", "--bs", "1,2,3", "--model", "tests.tiny_models:slow", *FAST],
        tmp_path,
        "stop",
        second_cell_running,
        signal.SIGINT,
    )
    assert code == 130, stderr
    assert stderr.strip().splitlines()[-1].startswith("interrupted: sweep stopped; 1 finished")
    assert cells["pytorch_fp32_bs1_slow"]["status"] == "ok"
    assert cells["pytorch_fp32_bs2_slow"]["status"] == "interrupted"
    assert cells["pytorch_fp32_bs3_slow"]["status"] == "pending"
    assert (tmp_path / "runs" / "stop" / "pytorch_fp32_bs1_slow" / "result.json").is_file()
    assert not (tmp_path / "runs" / "stop" / "pytorch_fp32_bs2_slow").exists()
    # no half-built staging folder of the interrupted cell is left behind
    for folder in (tmp_path / "runs" / "stop", tmp_path / "tb_logs" / "stop"):
        assert [p.name for p in folder.iterdir() if p.name.startswith(".") and p.is_dir()] == []
    assert "pytorch_fp32,1," in (tmp_path / "runs" / "stop" / "benchmark.csv").read_text()


# ---- bad input: one line, exit 2, nothing started -------------------------------------------


def _one_line(done, *fragments):
    assert done.code == 2, done
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


@pytest.mark.parametrize(
    "args, fragments",
    [
        (
            ["--backends", "pytorch_fp32,tensorflow", "--bs", "1"],
            ["--backends: unknown backend 'tensorflow'", "ttrt_fp16"],
        ),
        (["--backends", "", "--bs", "1"], ["--backends is empty"]),
        (["--backends", "pytorch_fp32", "--bs", " , "], ["--bs is empty"]),
        (["--backends", "pytorch_fp32,,pytorch_bf16", "--bs", "1"], ["has an empty item"]),
        (["--backends", "pytorch_fp32", "--bs", "8,8"], ["--bs names batch size 8 twice"]),
        (
            ["--backends", "pytorch_fp32,pytorch_fp32", "--bs", "8"],
            ["--backends names backend pytorch_fp32 twice"],
        ),
        (["--backends", "pytorch_fp32", "--bs", "8,x"], ["'x' is not a whole number"]),
        (["--backends", "pytorch_fp32", "--bs", "0"], ["at least 1"]),
        (
            ["--backends", "pytorch_fp32", "--bs", "1", "--baseline", "ttrt_fp16"],
            ["--baseline 'ttrt_fp16' is not one of --backends"],
        ),
        (["--backends", "pytorch_fp32", "--bs", "1", "--name", "../up"], ["not a plain folder"]),
        (
            ["--backends", "pytorch_fp32", "--bs", "1", "--compile-mode", "fast"],
            ["unknown --compile-mode"],
        ),
    ],
)
def test_bad_lists_and_options(cli, args, fragments):
    _one_line(cli("sweep", *args), *fragments)
    assert not Path("runs").exists()


def _fake_sweep(model: str, iters: int = 2) -> None:
    folder = Path("runs/old")
    folder.mkdir(parents=True)
    options = {"model": model, "iters": iters}
    (folder / "sweep.json").write_text(json.dumps({"options": options, "cells": {}}))


def test_existing_folder_needs_resume_or_name(cli):
    _fake_sweep("tests.tiny_models:conv_net")
    _one_line(
        cli("sweep", "--backends", "pytorch_fp32", "--bs", "1", "--name", "old"),
        "runs/old already exists: pass --resume",
        "--name",
    )


def test_resume_refuses_another_model(cli):
    _fake_sweep("resnet18")
    _one_line(
        cli(
            "sweep",
            "--backends",
            "pytorch_fp32",
            "--bs",
            "1",
            "--name",
            "old",
            "--model",
            "tests.tiny_models:conv_net",
            "--resume",
        ),
        "holds a sweep of model 'resnet18'",
        "--name",
    )


def test_resume_refuses_other_options(cli):
    from profiler.runs.manifest import shared_options

    options = {key: None for key in shared_options()}
    _fake_sweep("tests.tiny_models:conv_net")
    manifest = json.loads(Path("runs/old/sweep.json").read_text())
    manifest["options"] = {
        **options,
        "model": "tests.tiny_models:conv_net",
        "iters": 100,
        "image_size": 224,
        "seq_len": 128,
        "seed": 0,
        "compile_mode": "default",
        "memory_format": "auto",
        "cudnn_benchmark": True,
        "wait": 1,
        "warmup": 1,
        "active": 1,
        "repeat": 1,
        "gzip": True,
        "timed_warmup": 0,
        "tf32": False,
        "record_shapes": False,
        "profile_memory": False,
        "with_stack": False,
        "with_flops": False,
        "cache": True,
    }
    Path("runs/old/sweep.json").write_text(json.dumps(manifest))
    _one_line(
        cli(
            "sweep",
            "--backends",
            "pytorch_fp32",
            "--bs",
            "1",
            "--name",
            "old",
            "--model",
            "tests.tiny_models:conv_net",
            *FAST,
            "--resume",
        ),
        "--iters 100 (now 2)",
        "pass the same options",
    )


def test_a_cell_is_a_typed_config_carrying_every_shared_option(tmp_path):
    from profiler.runs.config import config_from_json, run_argv
    from profiler.sweep.plan import cell_config, cell_job, plan

    options = {
        "model": "resnet18",
        "iters": 5,
        "tf32": True,
        "cache": False,
        "gzip": True,
        "cudnn_benchmark": False,
        "max_rel_error": None,
    }
    config = cell_config(
        options, "pytorch_fp16", 4, sweep_dir=tmp_path / "s", trace_dir=tmp_path / "t"
    )
    assert (config.backend, config.batch_size, config.model, config.iters) == (
        "pytorch_fp16",
        4,
        "resnet18",
        5,
    )
    assert config.tf32 and not config.use_cache and config.gzip and not config.cudnn_benchmark
    assert (config.runs_dir, config.tb_dir) == (tmp_path / "s", tmp_path / "t")
    # ncu and nsys give the same config to a child process as arguments: one conversion
    args = run_argv(config.options())
    assert "--tf32" in args and "--no-cache" in args and "--no-cudnn-benchmark" in args
    assert "--max-rel-error" not in args and args[args.index("--iters") + 1] == "5"
    # a job travels as JSON and comes back the same config, named as the sweep names the cell
    p = plan(
        "pytorch_fp32", "2", options, name="s", runs_dir=tmp_path / "runs", tb_dir=tmp_path / "tb"
    )
    job = cell_job(p, p.cells[0])
    assert job.name == "pytorch_fp32_bs2_resnet18" and job.run_config().run_name == job.name
    assert config_from_json(job.config) == job.run_config()
    assert job.run_config().runs_dir == tmp_path / "runs" / "s"
    # in the sweep's own process (the rounds) the cell's config is made without the JSON trip
    cell = p.cells[0]
    direct = cell_config(
        options, cell.backend, cell.batch_size, cell.axis, p.sweep_dir, p.trace_dir
    )
    assert direct == job.run_config()
