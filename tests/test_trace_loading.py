"""The loader's fast path (split the events text into pieces, decode each) must give exactly
what a full parse gives, on any formatting, and leave odd files to the full parse."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from profiler.errors import UserError
from profiler.trace import file_bytes, halves, load, pieces, robust

FIXTURES = Path(__file__).parent / "fixtures"
V100 = FIXTURES / "kineto_tb_plugin" / "worker0.1623143089861.pt.trace.json.gz"
H200 = sorted((FIXTURES / "h200" / "tb_logs").glob("*/*.pt.trace.json.gz"))
#: eager FP16 ResNet50 on an H100 with stacks, memory and shapes (python_function events)
H100_STACKS = FIXTURES / "h100_stacks" / "h100_pytorch_fp16_bs8_stacks.pt.trace.json.gz"


def full_parse(path: Path) -> load.Trace:
    return robust.load_robust(path, file_bytes.read_data(path, mmap_ok=False))


def assert_same(a: load.Trace, b: load.Trace) -> None:
    pd.testing.assert_frame_equal(a.events, b.events, check_exact=True)
    pd.testing.assert_frame_equal(a.kernel_launch, b.kernel_launch, check_exact=True)
    assert list(a.names) == list(b.names)
    assert a.threads == b.threads
    assert a.categories == b.categories
    assert a.span == b.span
    assert a.devices == b.devices


def fast(path: Path) -> load.Trace:
    data = file_bytes.read_data(path)
    trace = load._load_split(path, data)
    assert trace is not None, "the fast path gave up"
    return trace


def v100_json() -> dict:
    return json.loads(gzip.decompress(V100.read_bytes()))


@pytest.fixture
def small_pieces(monkeypatch):
    """Pieces of tens of KB, so a small file is cut in many places."""
    monkeypatch.setattr(pieces, "_PIECE_BYTES", 50_000)


@pytest.mark.parametrize("path", [V100, *H200, H100_STACKS], ids=lambda p: p.parent.name)
def test_fast_path_matches_full_parse_on_fixtures(path, small_pieces):
    assert_same(fast(path), full_parse(path))


@pytest.fixture
def two_processes(monkeypatch):
    """Every file, however small, is read by two processes (where the system can fork)."""
    if not hasattr(halves.os, "fork"):
        pytest.skip("no fork on this system")
    monkeypatch.setattr(halves, "PARALLEL_LOAD", True)
    monkeypatch.setattr(halves, "PARALLEL_MIN_BYTES", 0)


@pytest.mark.parametrize("path", [V100, *H200, H100_STACKS], ids=lambda p: p.parent.name)
def test_two_processes_read_what_one_reads(path, small_pieces, two_processes, monkeypatch):
    built = []
    real = halves.build_halves
    monkeypatch.setattr(halves, "build_halves", lambda *a: built.append(real(*a)) or built[-1])
    trace = load.load_trace(path)
    assert built and built[0] is not None, "the two-process path gave up"
    assert_same(trace, full_parse(path))
    assert list(trace.categories) == list(full_parse(path).categories)  # the same order too


def test_two_processes_with_a_false_cut_in_the_middle(
    tmp_path, small_pieces, two_processes, monkeypatch
):
    """The middle of the file falls inside an event whose args hold a long list of objects
    ('}, {"' between them looks like an event boundary): the first half's last piece does not
    decode, so one process reads the file."""
    data = v100_json()
    events = data["traceEvents"][:2000]
    events[1000]["args"] = {"nested": [{"a": "x" * 1000}] * 2000}
    data["traceEvents"] = events
    path = tmp_path / "t.json"
    path.write_text(json.dumps(data))
    built = []
    real = halves.build_halves
    monkeypatch.setattr(halves, "build_halves", lambda *a: built.append(real(*a)) or built[-1])
    assert_same(load.load_trace(path), full_parse(path))
    assert built == [None]


def test_python_function_args_are_not_read():
    """Python events' args (Python ids of the call tree) fill none of the arg columns."""
    trace = load.load_trace(H100_STACKS)
    python = trace.of_kind("python")
    assert len(python) > len(trace.events) / 3
    assert (python[["external_id", "correlation", "device", "stream"]] == -1).all().all()
    ops = trace.of_kind("cpu_op")
    assert (ops["external_id"] >= 0).all()


@pytest.mark.parametrize("style", ["minified", "indented", "one_per_line", "odd_whitespace"])
def test_fast_path_on_other_formatting(tmp_path, small_pieces, monkeypatch, style):
    data = v100_json()
    events = data.pop("traceEvents")
    if style == "minified":
        text = json.dumps({**data, "traceEvents": events}, separators=(",", ":"))
    elif style == "indented":
        text = json.dumps({**data, "traceEvents": events}, indent=1)
    elif style == "one_per_line":  # traceEvents last, other keys after it
        text = (
            '{"traceEvents": [\n'
            + ",\n".join(json.dumps(e) for e in events)
            + '\n], "traceName": "a]b}, {\\"c\\": [1]}", "deviceProperties": '
            + json.dumps(data["deviceProperties"])
            + "}"
        )
    else:
        text = (
            '{ "deviceProperties" :\r\n'
            + json.dumps(data["deviceProperties"])
            + ' ,\t"traceEvents"\n:\t[ '
            + " \r\n,\t ".join(json.dumps(e) for e in events)
            + " \n ] \n}\n"
        )
    path = tmp_path / "t.json"
    path.write_text(text)
    monkeypatch.setattr(file_bytes, "_MMAP_MIN_BYTES", 1)  # and through a memory map
    assert isinstance(file_bytes.read_data(path), file_bytes.mmap.mmap)
    assert_same(fast(path), full_parse(path))
    assert_same(load.load_trace(path), load.load_trace(V100))


def test_cut_candidates_inside_events_are_rejected(tmp_path, small_pieces):
    """'}, {"' inside names and args (a list of objects) is not an event boundary."""
    data = v100_json()
    for i, e in enumerate(data["traceEvents"]):
        if i % 7 == 0 and isinstance(e.get("args"), dict):
            e["args"]["nested"] = [{"a": 1}, {"b": [{"c": 2}, {"d": 3}]}]
        if i % 11 == 0 and "name" in e:
            e["name"] += '::{lambda()#1}, {"x"}, {'
    path = tmp_path / "t.json"
    path.write_text(json.dumps(data, separators=(",", ":")))
    assert_same(fast(path), full_parse(path))


def test_null_args_and_old_spelling(tmp_path, monkeypatch):
    monkeypatch.setattr(pieces, "_PIECE_BYTES", 100)
    events = [
        {
            "ph": "X",
            "cat": "kernel",
            "name": "k1",
            "pid": 0,
            "tid": 7,
            "ts": 10,
            "dur": 5,
            "args": {
                "correlation": None,
                "external id": 4,
                "device": 0,
                "stream": None,
                "registers per thread": None,
                "blocks per SM": None,
                "grid": [2, 1, 1],
                "block": [64, 1, 1],
            },
        },
        {
            "ph": "X",
            "cat": "kernel",
            "name": "k2",
            "pid": 0,
            "tid": 7,
            "ts": 20,
            "dur": 5,
            "args": {
                "correlation": 3,
                "External id": 5,
                "external id": 9,
                "grid": [2, 1],
                "block": None,
            },
        },
        {
            "ph": "X",
            "cat": "cuda_runtime",
            "name": "cudaLaunchKernel",
            "pid": 1,
            "tid": 1,
            "ts": 9,
            "dur": 1,
            "args": None,
        },
        {"ph": "X", "cat": "mystery", "name": "m", "ts": 1, "dur": 1},
        {"ph": "i", "name": "marker", "ts": 3},
    ]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    trace = fast(path)
    assert_same(trace, full_parse(path))
    ev = trace.events
    assert ev["correlation"].tolist() == [-1, 3, -1]
    assert ev["external_id"].tolist() == [4, 5, -1]
    assert ev["stream"].tolist() == [-1, -1, -1]
    launch = trace.kernel_launch
    assert launch["registers_per_thread"].tolist() == [-1, -1]
    assert np.isnan(launch["blocks_per_sm"]).all()
    assert launch[["grid_x", "grid_y", "grid_z"]].to_numpy().tolist() == [[2, 1, 1], [2, 1, 1]]
    assert launch["block_x"].tolist() == [64, 0]
    assert trace.categories == {"kernel": 2, "cuda_runtime": 1, "mystery": 1}


@pytest.mark.parametrize(
    "text, message",
    [
        ('{"traceEvents": [{"ph": "X", "name": "a", "ts": 1},]}', "not valid JSON"),
        ('{"traceEvents": [{"ph": "X", "ts": 1}, {"ph": "i", "ts": 2}, ]}', "not valid JSON"),
        ('{"traceEvents": [{"ph": "X", "name": "a", "ts": 1}], }', "not valid JSON"),
        ('{"traceEvents": {"ph": "X"}}', "no traceEvents list"),
        ('{"other": [], "traceEvents": [{"ph": "X"}]', "not valid JSON"),
        ('{"traceEvents": [{"ph": "X"}]} trailing', "not valid JSON"),
        ('{"x": "\\"traceEvents\\": [1]"}', "no traceEvents list"),
    ],
)
def test_invalid_files_get_the_full_parse_errors(tmp_path, monkeypatch, text, message):
    monkeypatch.setattr(pieces, "_PIECE_BYTES", 10)
    path = tmp_path / "t.json"
    path.write_text(text)
    with pytest.raises(UserError, match=message):
        load.load_trace(path)


def test_whitespace_between_events_must_be_json(tmp_path, monkeypatch):
    """A form feed is whitespace to a regex but not to JSON: the full parse rejects it."""
    events = [
        json.dumps({"ph": "X", "cat": "kernel", "name": f"k{i}", "ts": i, "dur": 1})
        for i in range(400)
    ]
    path = tmp_path / "t.json"
    path.write_text('{"traceEvents": [' + "}\f,{".join(e[1:-1] for e in events).join("{}") + "]}")
    monkeypatch.setattr(pieces, "_PIECE_BYTES", 1000)
    assert load._load_split(path, file_bytes.read_data(path)) is None
    with pytest.raises(UserError, match="not valid JSON"):
        load.load_trace(path)


def test_events_of_no_or_unknown_phase(tmp_path, monkeypatch):
    """A piece with an event whose 'ph' is missing or outside the Trace Event Format is decoded
    with the plain Struct (any 'ph'); only complete ('X') events are kept either way."""
    monkeypatch.setattr(pieces, "_PIECE_BYTES", 100)
    kernel = {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 10, "dur": 5}
    odd = [
        {"name": "no phase", "ts": 1},
        {"ph": "Z", "name": "unknown", "ts": 2},
        {"ph": "x", "cat": "kernel", "name": "lower-case x", "ts": 3, "dur": 1},
    ]
    events = [dict(kernel, ts=10 * i) if i % 4 else odd[i // 4 % 3] for i in range(40)]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    trace = fast(path)
    assert_same(trace, full_parse(path))
    assert len(trace.events) == 30 and trace.categories == {"kernel": 30}
