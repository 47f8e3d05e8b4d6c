"""Hostile traces, results and manifests (issue 24, floors trace/ and runs/): each row builds a
file from a real trace or run and says what a command must do with it: one line, a warning, or
the name printed as text. A new file type or damage joins by adding a row. In-process."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest

from .conftest import FIXTURES

H200 = FIXTURES / "h200"
TRACE = H200 / "tb_logs" / "pytorch_fp16_bs8" / "resnet50.1795313772163769478.pt.trace.json.gz"
RUN = H200 / "runs" / "pytorch_fp16_bs8"


def _events(rename) -> bytes:
    data = json.loads(gzip.decompress(TRACE.read_bytes()))
    for event in data["traceEvents"]:
        rename(event)
    return json.dumps(data).encode()


def _kernels_named(name: str):
    def rename(event):
        if event.get("cat") in ("kernel", "cpu_op"):
            event["name"] = name

    return lambda p: p.write_bytes(_events(rename))


def _not_utf8(p: Path) -> None:
    text = gzip.decompress(TRACE.read_bytes())
    at = text.index(b'"name": "') + len(b'"name": "')
    p.write_bytes(text[:at] + b"\xff\xfe" + text[at:])


def _gzip_bomb(p: Path) -> None:
    with gzip.open(p, "wb", compresslevel=9) as f:
        f.write(b'{"traceEvents": [')
        for _ in range(300):
            f.write(b" " * (1 << 20))
        f.write(b"]}")


#: id -> (how to build trace.json[.gz], exit status, what stdout or stderr must hold, what
#: neither may hold)
TRACES = {
    # NEW-6: names were rich markup (a traceback for "[/]") and escapes reached the terminal
    "markup-close-tag": (_kernels_named("[/]"), 0, "[/]", "Traceback"),
    "markup-style": (
        _kernels_named("[bold red]x[/bold red]"),
        0,
        "[bold red]x[/bold red]",
        "Traceback",
    ),
    "escape-sequence": (_kernels_named("k\x1b[2Jclear"), 0, "k?[2Jclear", "\x1b[2J"),
    "osc8-link": (
        _kernels_named("\x1b]8;;http://x\x07k\x1b]8;;\x07"),
        0,
        "?]8;;http://x?k",
        "\x1b]8",
    ),
    # NEW-14: bytes that are not UTF-8: read with replacement, not a UnicodeDecodeError, and
    # said (the product's decision, whatever msgspec does with such bytes)
    "not-utf8": (_not_utf8, 0, "\ufffd", "Traceback"),
    "not-utf8-note": (_not_utf8, 0, "holds bytes that are not UTF-8", "Traceback"),
    # NEW-15: a gzip bomb: refused after a bounded inflation
    "gzip-bomb": (_gzip_bomb, 2, "gzip bomb", "MemoryError"),
}


@pytest.mark.parametrize("build, code, shown, never", TRACES.values(), ids=TRACES.keys())
def test_hostile_trace(cli, tmp_path, build, code, shown, never):
    name = "trace.json.gz" if build is _gzip_bomb else "trace.json"
    build(tmp_path / name)
    done = cli("summarize", str(tmp_path / name), "--view", "kernels")
    assert done.code == code, done
    both = done.stdout + done.stderr
    assert shown in both and never not in both, both[-2000:]
    if code:
        assert len(done.stderr.strip().splitlines()) == 1


def _result_with(**changes):
    def build(folder: Path) -> None:
        shutil.copytree(RUN, folder)
        data = json.loads((folder / "result.json").read_text())
        for dotted, value in changes.items():
            *parents, key = dotted.split(".")
            place = data
            for part in parents:
                place = place[part]
            place[key] = value
        (folder / "result.json").write_text(json.dumps(data))

    return build


#: id -> (how to build the run folder, what the one warning line says). NEW-9: a result.json
#: that does not read dropped the run's figures without a word
RESULTS = {
    "future-schema": (_result_with(schema=3), "this version reads up to"),
    "wrong-type": (_result_with(**{"timing.p50_ms": "fast"}), "result.json"),
    "timing-null": (_result_with(timing=None), "result.json"),
    # NEW-22: a negative latency was shown ("p50 latency -1.000 ms ... -123.65x the timed p50")
    "negative-p50": (_result_with(**{"timing.p50_ms": -1}), "$.timing.p50_ms"),
    "negative-throughput": (
        _result_with(**{"timing.throughput_samples_per_s": -5}),
        "$.timing.throughput_samples_per_s",
    ),
}


@pytest.mark.parametrize("build, fragment", RESULTS.values(), ids=RESULTS.keys())
def test_unreadable_result_is_one_warning(cli, tmp_path, monkeypatch, build, fragment):
    build(tmp_path / "run")
    monkeypatch.chdir(H200)  # where the run's trace names are relative to
    done = cli("summarize", str(tmp_path / "run"), "--view", "overview")
    assert done.code == 0, done
    warnings = [line for line in done.stderr.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and fragment in warnings[0] and "not shown" in warnings[0], (
        done.stderr
    )


@pytest.mark.parametrize("cell", ["../../victim", "/etc", "..", ".hidden", "a/b"])
def test_manifest_cell_names_stay_in_the_sweep(tmp_path, cell):
    """NEW-16: a cell name out of the sweep folder was followed (report, plot)."""
    from profiler.errors import UserError
    from profiler.runs.manifest import read_manifest

    sweep = tmp_path / "runs" / "sw"
    sweep.mkdir(parents=True)
    (sweep / "sweep.json").write_text(
        json.dumps(
            {
                "options": {},
                "cells": {cell: {"backend": "pytorch_fp32", "batch_size": 1, "status": "ok"}},
            }
        )
    )
    with pytest.raises(UserError, match="not a folder name of the sweep"):
        read_manifest(sweep)


def test_a_results_names_print_literally_in_the_run_view():
    """NEW-6 (the rest): the run view handed result.json's names to rich as markup: a backend
    named ``[/]`` was a MarkupError traceback, ``[bold red]m[/bold red]`` printed as ``m``, and an
    escape sequence in a file name reached the terminal."""
    import io

    import msgspec
    from rich.console import Console

    from profiler.report.run_view import print_result
    from profiler.runs.result import read_result

    result = read_result(RUN / "result.json")
    result = msgspec.structs.replace(
        result,
        model="[bold red]m[/bold red]",
        backend=msgspec.structs.replace(
            result.backend, name="[/]", artifacts=["[i]engine[/i].plan"]
        ),
        trace=msgspec.structs.replace(result.trace, files=["tb_logs/[/]/k\x1b[2J.pt.trace.json"]),
    )
    out = io.StringIO()
    print_result(result, Console(file=out, width=200, color_system=None))
    text = out.getvalue()
    for shown in ("[/]", "[bold red]m[/bold red]", "[i]engine[/i].plan", "tb_logs/[/]/k?[2J"):
        assert shown in text, text
    assert "\x1b" not in text


def test_repeated_step_numbers_are_each_a_step_with_a_warning(cli, tmp_path):
    """NEW-22: three ``ProfilerStep#1`` spans (one number, three times) were counted as one
    step; two thirds of the steps left the step table without a word."""

    def renumber(event):
        if str(event.get("name", "")).startswith("ProfilerStep#"):
            event["name"] = "ProfilerStep#1"

    (tmp_path / "trace.json").write_bytes(_events(renumber))
    done = cli("summarize", str(tmp_path / "trace.json"), "--view", "overview")
    assert done.code == 0, done
    for label in ("ProfilerStep#1 ", "ProfilerStep#1 (2)", "ProfilerStep#1 (3)"):
        assert label in done.stdout, done.stdout
    warnings = [line for line in done.stderr.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and "ProfilerStep#1" in warnings[0] and "3 times" in warnings[0], (
        done.stderr
    )


def test_one_step_recorded_twice_over_itself_is_one_step(tmp_path):
    """A step span and a copy of it over the same time (an annotation inside the operator of
    one name) stay one step, as before."""
    from profiler.trace.summary import summarize

    data = json.loads(gzip.decompress(TRACE.read_bytes()))
    steps = [e for e in data["traceEvents"] if str(e.get("name", "")).startswith("ProfilerStep#")]
    data["traceEvents"] += [dict(e, cat="cpu_op", ts=e["ts"] + 1, dur=e["dur"] - 2) for e in steps]
    (tmp_path / "trace.json").write_text(json.dumps(data))
    summary = summarize(tmp_path / "trace.json")
    assert list(summary.overview.steps["step"]) == sorted(e["name"] for e in steps)
    assert not [w for w in summary.warnings if "ProfilerStep" in w]
