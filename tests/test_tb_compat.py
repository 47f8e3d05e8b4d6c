"""tb-compat: the plugin-friendly copy of a trace, checked in-process against the plugin's own
parser (the real-server test checks it over HTTP)."""

import copy
import gzip
import json
import logging

import pytest

from profiler.runs.layout import compat_dir_for
from profiler.trace.tb_compat import CATEGORY_RENAMES, COMPAT_KEY, compat_trace, write_compat_copy

from .conftest import FIXTURES

H200_TB = FIXTURES / "h200" / "tb_logs"


def _trace(run):
    path = next((H200_TB / run).glob("*.pt.trace.json.gz"))
    return path, json.loads(gzip.decompress(path.read_bytes()))


def _plugin_steps(data):
    pytest.importorskip("torch_tb_profiler")
    from torch_tb_profiler.profiler.data import RunProfileData

    logging.disable(logging.WARNING)
    try:
        profile = RunProfileData.from_json("worker", 0, data)
    finally:
        logging.disable(logging.NOTSET)
    return list(profile.steps_names), dict(
        zip(
            [
                "kernel",
                "memcpy",
                "memset",
                "communication",
                "runtime",
                "dataloader",
                "cpu_exec",
                "other",
                "total",
            ],
            profile.avg_costs.costs,
        )
    )


def test_copy_renames_only_categories(tmp_path):
    path, original = _trace("inductor_fp16_bs8")
    tb_logs = tmp_path / "tb_logs"
    (tb_logs / "inductor_fp16_bs8").mkdir(parents=True)
    source = tb_logs / "inductor_fp16_bs8" / path.name
    source.write_bytes(path.read_bytes())
    result = write_compat_copy(source, compat_dir_for(source))
    assert result.written == tb_logs / "inductor_fp16_bs8_tbcompat" / path.name
    assert source.read_bytes() == path.read_bytes()  # the original is untouched
    copied = json.loads(gzip.decompress(result.written.read_bytes()))
    assert result.renamed == {
        "cuda_runtime -> Runtime": 382,
        "cuda_driver -> Runtime": 222,
        "gpu_user_annotation -> gpu_user_annotation_tbcompat": 3,
    }
    assert copied[COMPAT_KEY]["renamed"] == result.renamed
    before, after = original["traceEvents"], copied["traceEvents"]
    assert len(before) == len(after)
    for a, b in zip(before, after):
        if a.get("cat") in CATEGORY_RENAMES:
            assert b["cat"] == CATEGORY_RENAMES[a["cat"]][0]
            b = dict(b, cat=a["cat"])
        assert a == b
    assert not list(tb_logs.glob("**/*.tmp"))
    # a second pass changes nothing
    assert compat_trace(copied) == {}


def test_gpu_side_profiler_steps_are_not_extra_steps():
    """The H200 fixtures (torch 2.11) have GPU-timeline copies of `inference_step` only; other
    Kineto versions also copy `ProfilerStep#N` to the GPU timeline. CONSTRUCTED case: a twin
    named like each CPU step is added to each GPU copy of the real trace."""
    _, data = _trace("pytorch_fp16_bs8")
    gpu = sorted(
        (e for e in data["traceEvents"] if e.get("cat") == "gpu_user_annotation"),
        key=lambda e: e["ts"],
    )
    steps = sorted(
        e["name"]
        for e in data["traceEvents"]
        if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#")
    )
    data["traceEvents"] += [dict(e, name=s) for e, s in zip(gpu, steps)]
    raw_steps, _ = _plugin_steps(copy.deepcopy(data))
    assert raw_steps == ["2", "2", "3", "3", "4", "4"]  # the plugin's misreading
    compat_trace(data)
    fixed_steps, costs = _plugin_steps(data)
    assert fixed_steps == ["2", "3", "4"] and costs["runtime"] > 0


def test_tb_compat_command_converts_every_trace_of_a_run(cli, tmp_path):
    path, _ = _trace("ttrt_fp16_bs8")
    folder = tmp_path / "tb_logs" / "ttrt_fp16_bs8"
    folder.mkdir(parents=True)
    (folder / path.name).write_bytes(path.read_bytes())
    result = cli("tb-compat", "ttrt_fp16_bs8")
    assert result.code == 0, result.stderr
    assert "cuda_driver -> Runtime: 195" in result.stdout
    assert (tmp_path / "tb_logs" / "ttrt_fp16_bs8_tbcompat" / path.name).is_file()
    again = cli("tb-compat", str(tmp_path / "tb_logs" / "ttrt_fp16_bs8_tbcompat" / path.name))
    assert again.code == 2 and "already in a _tbcompat folder" in again.stderr
    assert cli("tb-compat", "nope").code == 2


# ---- the copies beside a run that runs again (issue 24, NEW-12) ----------------------------

TINY = [
    "--model",
    "tests.tiny_models:conv_net",
    "--bs",
    "2",
    "--iters",
    "2",
    "--timed-warmup",
    "0",
    "--active",
    "1",
]
RUN = "pytorch_fp32_bs2_conv_net"


def _visible(folder):
    return sorted(p.name for p in folder.iterdir() if not p.name.startswith("."))


def test_run_tb_compat_twice_keeps_the_new_runs_copy_only(cli, tmp_path):
    """NEW-12: run --tb-compat never replaced tb_logs/<run>_tbcompat: after two runs it held
    two traces, the "two spans of one worker" its separate folder is there to avoid."""
    for _ in range(2):
        done = cli("run", *TINY, "--tb-compat")
        assert done.code == 0, done
    assert _visible(tmp_path / "tb_logs" / f"{RUN}_tbcompat") == _visible(
        tmp_path / "tb_logs" / RUN
    )
    # tb-compat of the run again: the same, one copy per trace of the run
    assert cli("tb-compat", RUN).code == 0
    assert _visible(tmp_path / "tb_logs" / f"{RUN}_tbcompat") == _visible(
        tmp_path / "tb_logs" / RUN
    )
    # a run without --tb-compat: the copy of the run it replaced goes, with a note
    done = cli("run", *TINY)
    assert done.code == 0 and f"removed tb_logs/{RUN}_tbcompat/" in done.stderr, done
    assert not (tmp_path / "tb_logs" / f"{RUN}_tbcompat").exists()


def test_a_run_named_like_a_copy_folder_is_converted(cli, tmp_path):
    """NEW-12: a run named --name x_tbcompat could not be converted: its own trace folder was
    taken for a folder of copies ("no trace files"; run --tb-compat: exit 2 after the run)."""
    named = f"{RUN}_x_tbcompat".replace("conv_net_", "")  # pytorch_fp32_bs2_x_tbcompat
    done = cli("run", *TINY, "--name", "x_tbcompat", "--tb-compat")
    assert done.code == 0, done
    assert cli("tb-compat", named).code == 0
    assert _visible(tmp_path / "tb_logs" / f"{named}_tbcompat") == _visible(
        tmp_path / "tb_logs" / named
    )


def test_run_tb_compat_that_cannot_be_written_is_refused_before_the_run(cli, tmp_path):
    """NEW-12: run --tb-compat whose copy could not be written exited 2 after the run was
    committed to runs/."""
    (tmp_path / "tb_logs").mkdir()
    (tmp_path / "tb_logs" / f"{RUN}_tbcompat").write_text("my notes")
    done = cli("run", *TINY, "--tb-compat")
    assert done.code == 2 and done.stderr.count("\n") == 1, done
    assert f"{RUN}_tbcompat" in done.stderr
    assert not (tmp_path / "runs" / RUN).exists()
    assert (tmp_path / "tb_logs" / f"{RUN}_tbcompat").read_text() == "my notes"


def test_run_tb_compat_failing_after_the_run_is_a_warning(cli, tmp_path, monkeypatch):
    """A copy that fails once the run is written (a disk that fills): the run stands (exit 0),
    one warning line says how to make the copy, and no copy of the previous run is left."""
    import errno
    import os

    from profiler.trace import tb_compat

    assert cli("run", *TINY, "--tb-compat").code == 0

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), "x.pt.trace.json.gz")

    monkeypatch.setattr(tb_compat, "write_compat_copy", full)
    done = cli("run", *TINY, "--tb-compat")
    assert done.code == 0, done
    warnings = [line for line in done.stderr.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and f"tb-compat runs/{RUN}" in warnings[0], done.stderr
    assert "No space left on device" in warnings[0]
    assert not (tmp_path / "tb_logs" / f"{RUN}_tbcompat").exists()
    assert [p.name for p in (tmp_path / "tb_logs").iterdir()] == [RUN]


def test_a_run_without_a_trace_leaves_no_trace_of_the_run_before(cli, tmp_path):
    """NEW-12: a re-run with --capture cuda-profiler-api replaced runs/<run> but left the
    previous run's trace in tb_logs/<run>: TensorBoard showed the old trace under the new run."""
    assert cli("run", *TINY).code == 0
    done = cli("run", *TINY, "--capture", "cuda-profiler-api")
    assert done.code == 0, done
    assert not (tmp_path / "tb_logs" / RUN).exists()
    result = json.loads((tmp_path / "runs" / RUN / "result.json").read_text())
    assert result["trace"]["files"] == []


def test_tb_compat_of_a_trace_with_nothing_to_change_writes_no_copy(cli, tmp_path):
    """A CPU run's trace has no category the plugin misreads: `tb-compat` says so and writes
    no copy (TensorBoard reads the run's own folder right)."""
    assert cli("run", *TINY).code == 0
    done = cli("tb-compat", RUN)
    assert done.code == 0, done.stderr
    assert "nothing to change: the plugin reads it as it is; no copy written" in done.stdout
    assert not (tmp_path / "tb_logs" / f"{RUN}_tbcompat").exists()
    trace = next((tmp_path / "tb_logs" / RUN).glob("*.pt.trace.json*"))
    done = cli("tb-compat", str(trace), "--out", str(tmp_path / "copies"))
    assert done.code == 0 and "no copy written" in done.stdout, done.stderr
    assert not (tmp_path / "copies").exists()
