"""Honest outcomes of a run that goes wrong (issue 15, point 4): a user's model that fails or
exits, memory running out (GPU, host, or only the FP32 reference), a trace cut short by a full
disk, a damaged sweep manifest. Each is one line and a non-zero exit, with nothing half-written;
or, where the measurement itself is sound, the run is kept and says what it could not check."""

import gzip
import json
import os
import subprocess
from pathlib import Path

import pytest

from .test_cli_errors import assert_nothing_written, assert_one_line_error

FAST = ["--iters", "2", "--timed-warmup", "0", "--active", "1", "--bs", "2"]


# ---- D9, D17: a --model package.module:function that raises or exits ------------------------


@pytest.mark.parametrize(
    "function, fragments",
    [
        (
            "builder_raises",
            [
                "--model tests.tiny_models:builder_raises failed: ValueError: boom in "
                "the builder (at tiny_models.py:",
                "in builder_raises)",
            ],
        ),
        (
            "shape_mismatch",
            [
                "--model tests.tiny_models:shape_mismatch failed: RuntimeError:",
                "shapes cannot be multiplied",
            ],
        ),
        (
            "inputs_of_strings",
            ["example_inputs as a tensor or a tuple of tensors", "it returned a list of str"],
        ),
        ("inputs_not_iterable", ["it returned int"]),
        (
            "builder_exits",
            [
                "--model tests.tiny_models:builder_exits called sys.exit(0) (at tiny_models.py:",
                "nothing was written",
            ],
        ),
        (
            "sysexit_forward",
            ["--model tests.tiny_models:sysexit_forward called sys.exit(0)", "in forward)"],
        ),
    ],
)
def test_user_model_failure_is_one_line_naming_the_function(cli, function, fragments):
    done = cli("run", "--model", f"tests.tiny_models:{function}", *FAST)
    assert_one_line_error(done, *fragments, progress_before=True)
    assert_nothing_written()


# ---- D8: host memory ------------------------------------------------------------------------


def test_host_out_of_memory_building_the_batch_is_one_line(cli):
    done = cli("run", "--model", "tests.tiny_models:conv_net", *FAST[:-2], "--bs", "1000000000000")
    assert_one_line_error(
        done,
        "host out of memory at batch size 1000000000000",
        "tried to allocate",
        "try a smaller --bs",
    )
    assert_nothing_written()


def test_host_out_of_memory_in_the_forward_is_one_line(cli):
    done = cli("run", "--model", "tests.tiny_models:host_oom_forward", *FAST)
    assert_one_line_error(done, "host out of memory at batch size 2", progress_before=True)
    assert_nothing_written()


def test_a_sweep_records_host_out_of_memory_as_oom(tmp_path):
    from profiler.runs.config import RunConfig, config_to_json
    from profiler.sweep.cell import CellJob, run_job

    # the kind comes from the harness's exception, the reason is the line `run` prints above
    config = RunConfig(
        model="tests.tiny_models:host_oom_forward",
        batch_size=9,
        iters=2,
        timed_warmup=0,
        active=1,
        runs_dir=tmp_path / "runs",
        tb_dir=tmp_path / "tb",
    )
    outcome = run_job(
        CellJob(name="c", config=config_to_json(config), log_path=str(tmp_path / "cell.log"))
    )
    assert (outcome.kind, outcome.status, outcome.exit_code) == ("host-oom", "oom", 2)
    assert outcome.reason.startswith("host out of memory at batch size 9 (pytorch_fp32, ")


# ---- D5: the FP32 reference does not fit ----------------------------------------------------


def test_reference_that_does_not_fit_keeps_the_measurement(cli):
    # --max-rel-error cannot fail a check that could not run: the measurement is kept
    done = cli(
        "run",
        "--backend",
        "torchscript_fp32",
        "--model",
        "tests.tiny_models:reference_oom",
        *FAST,
        "--max-rel-error",
        "0.01",
    )
    assert done.code == 0, done.stderr
    assert "numerics: skipped (reference did not fit)" in done.stderr  # the progress line
    assert "numerics: skipped (reference did not fit)" in done.stdout  # the result view
    result = json.loads(Path("runs/torchscript_fp32_bs2_reference_oom/result.json").read_text())
    assert result["numerics"]["skipped"] == "reference did not fit"
    assert "out of memory in the FP32 eager reference" in result["numerics"]["reason"]
    assert result["timing"]["p50_ms"] > 0
    assert Path(result["trace"]["files"][0]).is_file()


# ---- D3: a trace cut short (disk full) is never promoted -----------------------------------


def test_truncated_or_unfinished_traces_are_refused(tmp_path):
    from profiler.collect.window import finished_traces
    from profiler.errors import UserError

    whole = b'{"traceEvents": [], "displayTimeUnit": "ms"}\n'
    (tmp_path / "w.1.pt.trace.json").write_bytes(whole)
    (tmp_path / "w.2.pt.trace.json.gz").write_bytes(gzip.compress(whole))
    assert finished_traces(tmp_path) == ["w.1.pt.trace.json", "w.2.pt.trace.json.gz"]
    cases = {
        "w.3.pt.trace.json.tmp": whole,  # Kineto's temporary name, left by a failed write
        "w.3.pt.trace.json": whole[:20],  # cut short
        "w.3.pt.trace.json.gz": gzip.compress(whole)[:-6],  # a gzip stream without its end
    }
    for name, data in cases.items():
        (tmp_path / name).write_bytes(data)
        with pytest.raises(UserError, match=f"{name.replace('.', '[.]')} is cut short"):
            finished_traces(tmp_path)
        (tmp_path / name).unlink()


@pytest.fixture
def tiny_disk(tmp_path):
    """A 64 KiB tmpfs: needs root and mount(2) (skipped elsewhere)."""
    mount = tmp_path / "full"
    mount.mkdir()
    if (
        os.geteuid() != 0
        or subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)], capture_output=True
        ).returncode
        != 0
    ):
        pytest.skip("cannot mount a tmpfs here (needs root)")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=False)


def test_disk_full_during_an_uncompressed_trace_write_fails_the_run(cli, tiny_disk):
    done = cli(
        "run",
        "--model",
        "resnet18",
        "--image-size",
        "32",
        *FAST,
        "--no-gzip",
        "--tb-dir",
        str(tiny_disk / "tb"),
        "--name",
        "df",
    )
    assert_one_line_error(
        done,
        "torch.profiler did not finish writing the trace",
        "is the disk full?",
        progress_before=True,
    )
    assert_nothing_written()
    assert not (tiny_disk / "tb").exists() or not any((tiny_disk / "tb").iterdir())


# ---- D20: a damaged manifest ----------------------------------------------------------------


@pytest.mark.parametrize(
    "manifest, problem",
    [
        ({"cells": {}, "options": "x"}, "Expected `object`, got `str` - at `$.options`"),
        ({"cells": {"pytorch_fp32_bs1": "done"}, "options": {}}, "got `str` - at `$.cells[...]`"),
        ({"cells": [], "options": {}}, "Expected `object`, got `array` - at `$.cells`"),
        ({"cells": {}, "options": {}, "batch_sizes": [True]}, "got `bool` - at `$.batch_sizes[0]`"),
        (
            {"cells": {"c": {"backend": "b", "batch_size": 1, "status": 3}}, "options": {}},
            "got `int` - at `$.cells[...].status`",
        ),
    ],
)
def test_damaged_sweep_manifest_is_one_line_and_left_alone(cli, manifest, problem):
    path = Path("runs/c/sweep.json")
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(manifest))
    before = path.read_bytes()
    done = cli(
        "sweep",
        "--model",
        "tests.tiny_models:conv_net",
        "--backends",
        "pytorch_fp32",
        "--bs",
        "1",
        "--name",
        "c",
        "--resume",
    )
    assert_one_line_error(done, "runs/c/sweep.json is damaged", problem)
    assert path.read_bytes() == before
    plotted = cli("plot", "runs/c")
    assert_one_line_error(plotted, problem)
