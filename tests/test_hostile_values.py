"""Hostile values on the command line (issue 24, floor: CLI values): each row is one command
line that must be refused with one ``error:`` line, exit status 2, no traceback, and nothing
written. A new option joins by adding a row. In-process, before any model is built."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from .conftest import FIXTURES

H200_RUN = str(FIXTURES / "h200" / "runs" / "pytorch_fp16_bs8")
TINY = ["--model", "tests.tiny_models:conv_net", "--bs", "2"]
HUGE = "99999999999999999999999"

#: id -> (command line, what the one line must say); {tmp} is the scratch folder
CASES = {
    # NEW-13: numeric options other than --bs were unbounded (overflow tracebacks)
    "seed-beyond-64-bits": (["run", *TINY, "--seed", HUGE], "--seed must be from"),
    "image-size-huge": (["run", *TINY, "--image-size", HUGE], "--image-size"),
    "image-size-4e9": (["run", *TINY, "--image-size", "4000000000"], "too large"),
    "seq-len-huge": (
        ["run", "--model", "transformer", "--bs", "2", "--seq-len", HUGE],
        "--seq-len",
    ),
    "min-time-inf": (["run", *TINY, "--min-time", "inf"], "--min-time must be"),
    "min-time-1e308": (["run", *TINY, "--min-time", "1e308"], "--min-time must be"),
    "iters-huge": (["run", *TINY, "--iters", "4000000000"], "--iters"),
    "warmup-huge": (["run", *TINY, "--warmup", "4000000000"], "--warmup"),
    "peaks-matmul-n": (["peaks", "--matmul-n", "3037000500"], "--matmul-n must be"),
    "peaks-matmul-n-huge": (["peaks", "--matmul-n", HUGE], "--matmul-n"),
    "peaks-copy-mib": (["peaks", "--copy-mib", "100000000"], "--copy-mib must be"),
    # NEW-22: a newline in an argument must not forge a second error line
    "newline-in-target": (["summarize", "nope\nerror: injected"], "nope\\nerror: injected"),
    "escape-in-target": (["summarize", "nope\x1b[2J"], "nope\\x1b[2J"),
    # NEW-22: --peaks-dir that is a file was ignored silently
    "peaks-dir-file": (
        ["report", H200_RUN, "--peaks-dir", "{tmp}/afile", "--out", "{tmp}/r.html"],
        "--peaks-dir",
    ),
    # NEW-7: --flops read anything, unbounded (a FIFO hung, /dev/zero took the memory)
    "flops-fifo": (
        ["report", H200_RUN, "--flops", "{tmp}/fifo", "--out", "{tmp}/r.html"],
        "not a regular file",
    ),
    "flops-dev-zero": (
        ["report", H200_RUN, "--flops", "/dev/zero", "--out", "{tmp}/r.html"],
        "not a regular file",
    ),
    # NEW-3: an --out that is not a regular file is never replaced
    "report-out-fifo": (["report", H200_RUN, "--out", "{tmp}/fifo"], "not a regular file"),
    "summarize-out-fifo": (
        ["summarize", H200_RUN, "--out", "{tmp}/fifo.parquet"],
        "not a regular file",
    ),
}


@pytest.mark.parametrize("args, fragment", CASES.values(), ids=CASES.keys())
def test_hostile_value_is_one_line(cli, tmp_path, monkeypatch, args, fragment):
    (tmp_path / "afile").write_text("x")
    os.mkfifo(tmp_path / "fifo")
    os.mkfifo(tmp_path / "fifo.parquet")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    done = cli(*[a.replace("{tmp}", str(tmp_path)) for a in args])
    lines = done.stderr.strip().splitlines()
    assert done.code == 2, done
    assert len(lines) == 1 and lines[0].startswith("error: ") and fragment in lines[0], lines
    assert not Path("runs").exists() and not Path("tb_logs").exists()
    for fifo in ("fifo", "fifo.parquet"):  # NEW-3: still FIFOs, never replaced
        assert (tmp_path / fifo).is_fifo()
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp file


@pytest.mark.parametrize(
    "gpus, visible, fragment",
    [
        ("0,1", "", "no GPU is visible here"),  # NEW-10: accepted without GPUs before
        ("0", "", "no GPU is visible here"),
        ("\uff10", "0", "is not a GPU index"),  # a fullwidth digit
    ],
)
def test_sweep_gpus_need_gpus(cli, monkeypatch, gpus, visible, fragment):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    done = cli("sweep", "--backends", "pytorch_fp32", "--bs", "1", "--gpus", gpus)
    lines = done.stderr.strip().splitlines()
    assert done.code == 2 and len(lines) == 1 and fragment in lines[0], done
    assert not Path("runs").exists()
