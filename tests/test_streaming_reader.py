"""The streaming reader (a plain file mapped and let go a piece at a time, a gzip file inflated a
block at a time, both in chunks taken by two processes) gives what the full parse gives, keeps
per event only the rows its tables read, and the blockwise analyses give the bits the whole
arrays would. No timing here: rows, tables and bytes are counted."""

from __future__ import annotations

import gzip
import json
import zlib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from profiler.errors import UserError
from profiler.trace import (
    breakdown,
    file_bytes,
    halves,
    intervals,
    kernels,
    load,
    operators,
    pieces,
    robust,
    steps,
)
from profiler.trace.schema import EVENT_KINDS
from profiler.trace.summary import summarize_trace

from .conftest import FIXTURES, ROOT

SHARED = Path("/work/shared/traces")


def _is_trace(path: Path) -> bool:
    """A JSON file whose first 64 KB hold the traceEvents key."""
    with open(path, "rb") as f:
        head = f.read(1 << 16)
    if head[:2] == b"\x1f\x8b":
        head = zlib.decompressobj(31).decompress(head, 1 << 16)
    return b'"traceEvents"' in head


#: every committed trace: the fixtures' and the shared folder's (where there is one)
COMMITTED = sorted(
    p
    for root in (FIXTURES, SHARED)
    if root.exists()
    for p in root.rglob("*.json*")
    if p.is_file() and p.name.endswith((".json", ".json.gz")) and _is_trace(p)
)
H200 = FIXTURES / "h200" / "tb_logs" / "ttrt_fp16_bs8"
LLM = FIXTURES / "llm_h200" / "capture" / "eager_bs1.json.gz"
STACKS = FIXTURES / "h100_stacks" / "h100_pytorch_fp16_bs8_stacks.pt.trace.json.gz"


def full_parse(path: Path) -> load.Trace:
    return robust.load_robust(path, file_bytes.read_data(path, mmap_ok=False))


def assert_same(a: load.Trace, b: load.Trace) -> None:
    pd.testing.assert_frame_equal(a.events, b.events, check_exact=True)
    pd.testing.assert_frame_equal(a.kernel_launch, b.kernel_launch, check_exact=True)
    assert list(a.names) == list(b.names)
    assert a.threads == b.threads
    assert list(a.categories.items()) == list(b.categories.items())
    assert a.span == b.span and a.devices == b.devices
    assert a.excluded == b.excluded and a.unread == b.unread


@pytest.fixture
def many_chunks(monkeypatch):
    """Every file read by two processes (where the system can fork), in chunks of a few KB:
    both processes take chunks, and the chunks' names and threads are renumbered."""
    if not hasattr(halves.os, "fork"):
        pytest.skip("no fork on this system")
    monkeypatch.setattr(halves, "PARALLEL_LOAD", True)
    monkeypatch.setattr(halves, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(halves, "_CHUNK_BYTES", 20_000)
    monkeypatch.setattr(pieces, "_PIECE_BYTES", 5_000)
    monkeypatch.setattr(pieces, "STREAM_CHUNK_BYTES", 20_000)


def test_every_committed_trace_is_found():
    assert len(COMMITTED) >= 25 and LLM in COMMITTED


@pytest.mark.parametrize("path", COMMITTED, ids=lambda p: f"{p.parent.name}/{p.name[:24]}")
def test_streaming_reader_equals_the_full_parse(path, many_chunks):
    """One process and two, plain and gzip: the Trace the full parse (robust.py, the reader
    before streaming) gives."""
    try:
        expected = full_parse(path)
    except UserError:  # (not a trace: gpu_metrics_expected.json)
        with pytest.raises(UserError):
            load.load_trace(path)
        return
    assert_same(load.load_trace(path), expected)
    halves.PARALLEL_LOAD = False
    assert_same(load.load_trace(path), expected)


def repeated(source: Path, copies: int, out: Path) -> dict[str, int]:
    """``source``'s events ``copies`` times over (times shifted, ids fresh), written to
    ``out``; how many events of each kind of record it holds."""
    data = json.loads(gzip.decompress(source.read_bytes()))
    events = data.pop("traceEvents")
    timed = [e["ts"] + e.get("dur", 0) for e in events if isinstance(e.get("ts"), (int, float))]
    period = max(timed) - min(timed) + 1000
    ids = ("External id", "correlation", "Ev Idx")
    shift = 1 + max(
        [v for e in events for v in [e.get("id")] + [(e.get("args") or {}).get(k) for k in ids]]
        + [0],
        key=lambda v: v if isinstance(v, int) else 0,
    )
    lines = []
    for copy in range(copies):
        for event in events:
            if copy and (event.get("ph") == "M" or event.get("cat") == "Trace"):
                continue
            e = dict(event)
            if isinstance(e.get("ts"), (int, float)):
                e["ts"] += copy * period
            if isinstance(e.get("id"), int):
                e["id"] += copy * shift
            if isinstance(e.get("args"), dict):
                e["args"] = {
                    k: v + copy * shift if k in ids and isinstance(v, int) else v
                    for k, v in e["args"].items()
                }
            if str(e.get("name", "")).startswith("ProfilerStep#"):
                e["name"] = f"ProfilerStep#{int(e['name'][13:]) + copy * 10}"
            lines.append(json.dumps(e))
        # and a complete event of a category no table reads, as Kineto writes its own
        overhead = {"ph": "X", "cat": "overhead", "name": "Activity Buffer Request", "pid": -1}
        lines.append(json.dumps(overhead | {"tid": 0, "ts": min(timed) + copy * period, "dur": 1}))
    out.write_text(json.dumps(data)[:-1] + ', "traceEvents": [\n' + ",\n".join(lines) + "\n]}")
    counted = {"events": 0, "complete": 0, "kept": 0}
    for line in lines:
        e = json.loads(line)
        counted["events"] += 1
        counted["complete"] += e.get("ph") == "X"
        counted["kept"] += e.get("ph") == "X" and e.get("cat") in EVENT_KINDS
    return counted


def test_the_reader_keeps_rows_only_for_the_events_its_tables_read(tmp_path):
    """The same steps 10 and 100 times over: rows grow with the complete events of a kind the
    tables read and with nothing else (flows, instants, metadata, complete events of other
    categories: counted, never stored); names, threads, categories, launch configurations and
    the unread counts' keys are tables of distinct values, the same size however long the
    trace; a row takes at most 40 bytes."""
    source = next(H200.glob("*.pt.trace.json.gz"))
    found = {}
    for copies in (1, 10, 100):
        counted = repeated(source, copies, tmp_path / f"x{copies}.json")
        trace = load.load_trace(tmp_path / f"x{copies}.json")
        assert counted["events"] > counted["complete"] > counted["kept"]
        assert len(trace.events) == counted["kept"]  # not one row more
        found[copies] = trace
    one, ten, hundred = found[1], found[10], found[100]
    per_copy = (len(ten.events) - len(one.events)) // 9
    assert len(hundred.events) - len(ten.events) == 90 * per_copy
    for trace in (ten, hundred):
        assert len(trace.threads) == len(one.threads)
        assert set(trace.categories) == set(one.categories)
        assert len(trace.launch.configs) == len(one.launch.configs)
        assert trace.launch.config.dtype == np.int32
        assert set(trace.unread) == set(one.unread)
        assert trace.events.memory_usage(index=False).sum() <= 40 * len(trace.events)
    # step names grow with the steps (ProfilerStep#N), every other name is one of the first's
    new = set(hundred.names) - set(one.names)
    assert new and all(n.startswith("ProfilerStep#") for n in new)


def test_a_gzip_trace_gives_the_tables_of_the_plain_one(tmp_path, monkeypatch):
    """Streamed (never inflated whole: read_data is not called), in one process and two, from
    one gzip member or several."""
    plain = tmp_path / "t.json"
    plain.write_bytes(gzip.decompress(STACKS.read_bytes()))
    text = plain.read_bytes()
    one = tmp_path / "one.json.gz"
    one.write_bytes(gzip.compress(text))
    members = tmp_path / "members.json.gz"
    cut = len(text) // 3
    members.write_bytes(gzip.compress(text[:cut]) + b"\0\0" + gzip.compress(text[cut:]))
    expected = load.load_trace(plain)
    expected_tables = summarize_trace(expected).to_dict()

    def whole(*args, **kwargs):
        raise AssertionError("a gzip trace was inflated whole")

    monkeypatch.setattr(load, "read_data", whole)
    monkeypatch.setattr(pieces, "STREAM_CHUNK_BYTES", 50_000)
    for path in (one, members):
        for parallel in (False, True):
            monkeypatch.setattr(halves, "PARALLEL_LOAD", parallel and hasattr(halves.os, "fork"))
            monkeypatch.setattr(halves, "PARALLEL_MIN_BYTES", 0)
            trace = load.load_trace(path)
            assert_same(trace, expected)
            assert summarize_trace(trace).to_dict() == expected_tables | {"trace": str(path)}


def test_truncated_and_damaged_gzip_are_one_line(tmp_path):
    text = gzip.decompress(STACKS.read_bytes())
    packed = gzip.compress(text)
    for name, data in (
        ("truncated", packed[: len(packed) // 2]),
        ("no trailer", packed[:-6]),
        ("damaged", packed[:100] + bytes(200) + packed[300:]),
    ):
        path = tmp_path / f"{name}.json.gz"
        path.write_bytes(data)
        with pytest.raises(UserError, match="damaged or truncated gzip") as error:
            load.load_trace(path)
        assert "\n" not in str(error.value)


def test_a_gzip_bomb_is_refused_while_it_streams(tmp_path, monkeypatch):
    """The bomb is refused by the streaming read itself, after inflating a bounded amount."""
    monkeypatch.setattr(file_bytes, "_INFLATE_FLOOR", 8 << 20)
    bomb = tmp_path / "bomb.json.gz"
    inflater = zlib.compressobj(9, zlib.DEFLATED, 31)
    body = b'{"traceEvents": [' + b" " * (64 << 20) + b"]}"
    bomb.write_bytes(inflater.compress(body) + inflater.flush())
    read = []
    real = file_bytes._inflate

    def counted(path, compressed, limit):
        for block in real(path, compressed, limit):
            read.append(len(block))
            yield block

    monkeypatch.setattr(file_bytes, "_inflate", counted)
    with pytest.raises(UserError, match="gzip bomb"):
        load.load_trace(bomb)
    assert sum(read) <= 8 << 20


def test_progress_on_stderr_for_large_traces_nothing_on_stdout(cli, monkeypatch):
    """A trace over load.PROGRESS_MIN_BYTES (here every trace) says how far reading is on
    stderr, in tenths; --json's stdout is the document alone; -q says nothing."""
    monkeypatch.setattr(load, "PROGRESS_MIN_BYTES", 0)
    monkeypatch.setattr(halves, "_CHUNK_BYTES", 50_000)
    plain = Path("t.pt.trace.json").resolve()
    plain.write_bytes(gzip.decompress(STACKS.read_bytes()))
    done = cli("summarize", str(plain), "--json")
    assert done.code == 0, done
    lines = [x for x in done.stderr.splitlines() if x.startswith("reading t.pt.trace.json: ")]
    assert lines and all(" % of " in x for x in lines), done.stderr
    assert json.loads(done.stdout)["trace"] == str(plain)
    quiet = cli("summarize", str(plain), "--json", "-q")
    assert quiet.code == 0 and "reading" not in quiet.stderr


#: the numpy whose pairwise summation padded_sum follows bit for bit (2.4); an older one (2.2,
#: which apache-otava pins) orders its additions otherwise, a few units in the last place apart
SAME_SUMMATION = np.lib.NumpyVersion(np.__version__) >= "2.4.0"


@pytest.mark.parametrize("seed", range(6))
def test_padded_sum_is_numpys_sum_of_the_padded_array(seed):
    rng = np.random.default_rng(seed)
    for _ in range(60):
        n = int(rng.integers(1, 30_000)) if seed % 2 else int(rng.integers(1, 400))
        at = int(rng.integers(0, n))
        values = rng.random(int(rng.integers(0, n - at + 1))) * 10 ** rng.uniform(-3, 6)
        padded = np.zeros(n)
        padded[at : at + len(values)] = values
        total = intervals.padded_sum(values, n, at)
        if SAME_SUMMATION:
            assert total == float(padded.sum())
        else:
            assert abs(total - float(padded.sum())) <= 8 * np.spacing(float(padded.sum()))


@pytest.mark.parametrize("path", [STACKS, LLM, H200 / "x"], ids=["stacks", "llm", "ttrt"])
def test_blockwise_analyses_give_the_bits_of_the_whole(path, monkeypatch):
    """Blocks of a few intervals, segments and nested ranges: the same summary (every
    float, every table) as one block."""
    path = path if path.exists() else next(H200.glob("*.pt.trace.json.gz"))
    trace = load.load_trace(path)
    expected = json.dumps(summarize_trace(trace).to_dict(), default=str)
    monkeypatch.setattr(intervals, "_MERGE_BLOCK", 7)
    for module in (steps, breakdown, operators):
        monkeypatch.setattr(module, "_SEGMENTS", 5)
    monkeypatch.setattr(operators, "_NESTING_BLOCK", 3)
    assert json.dumps(summarize_trace(trace).to_dict(), default=str) == expected


def test_operators_and_launch_calls_as_pandas_maps_them():
    """The sorted searches give pandas' maps: the first row of each id (an operator over a
    range), unsorted ids and a correlation shared by two launch calls included."""
    trace = load.load_trace(STACKS)
    ev = trace.events.copy()
    ev.loc[ev.index[::-1], "external_id"] = ev["external_id"].to_numpy()  # ids out of order
    launches = np.flatnonzero(ev["kind"].isin([load.KIND["runtime"], load.KIND["driver"]]))
    ev.loc[launches[5], "correlation"] = ev.loc[launches[4], "correlation"]  # one shared
    trace.events = ev
    ops = ev[ev["kind"].isin([load.KIND["cpu_op"], load.KIND["annotation"]])]
    ops = ops[ops["external_id"] >= 0].sort_values("kind", kind="stable")
    by_id = pd.Series(ops["name_id"].to_numpy(), index=ops["external_id"].to_numpy())
    by_id = by_id[~by_id.index.duplicated()]
    asked = np.concatenate([ev["external_id"].to_numpy(), [-1, 10**8]])
    expected = pd.Series(asked).map(by_id).fillna(-1).to_numpy(dtype=np.int64)
    assert (kernels.operators_of_external(trace, asked) == expected).all()
    calls = ev.iloc[launches]
    calls = calls[calls["correlation"] >= 0]
    first = pd.Series(calls.index.to_numpy(), index=calls["correlation"].to_numpy())
    first = first[~first.index.duplicated()]
    correlation = ev["correlation"].to_numpy()
    expected = pd.Series(correlation).map(first).fillna(-1).to_numpy(dtype=np.int64)
    assert (kernels.launch_rows(trace, correlation) == expected).all()
    assert kernels.launch_table(trace).repeated


def test_repeated_events_found_in_any_order(tmp_path):
    """Events written twice, anywhere in the file: the exclusions pandas' duplicated() over
    every column gives."""
    data = json.loads(gzip.decompress(STACKS.read_bytes()))
    events = data["traceEvents"]
    rng = np.random.default_rng(0)
    picked = [events[i] for i in rng.choice(len(events), 300, replace=False)]
    data["traceEvents"] = [events[i] for i in rng.permutation(len(events))] + picked
    path = tmp_path / "t.json"
    path.write_text(json.dumps(data))
    trace = load.load_trace(path)
    assert trace.excluded.get("duplicated", 0) > 0
    kept = trace.events[trace.events["kind"] != load.KIND["python"]]
    assert not kept.duplicated().any()  # none of those left


def test_the_builder_of_the_benchmark_traces_repeats_the_decode_steps(tmp_path):
    """scripts/llm_trace_builder.py (the 1, 3 and 10 GB traces of the benchmark): each copy of
    the 8 decode steps shifted and with fresh ids, so the summary counts them all."""
    import sys

    sys.path.insert(0, str(ROOT / "scripts"))
    import llm_trace_builder

    out = tmp_path / "llm.json"
    counted = llm_trace_builder.build(LLM, out, 0.03)
    trace = load.load_trace(out)
    assert counted["copies"] >= 2
    assert len(trace.events) == counted["complete events"] - 2  # ('overhead': 2, not read)
    summary = summarize_trace(trace)
    assert summary.phases is not None
    decode = summary.phases.phases.set_index("phase").loc["decode"]
    assert decode["spans"] == counted["decode steps"]
    assert not summary.excluded_events  # no event twice, no id reused
