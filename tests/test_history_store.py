"""The results history's store (profiler.runs.history_store): a record round-trips whole, is added
once, survives two writers at once, a writer killed mid-transaction and a schema upgrade, and a
database it cannot read is one error line."""

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap

import pytest

from profiler.commands.history import record_of
from profiler.errors import UserError
from profiler.runs import history_store
from profiler.runs.history_store import (
    HistoryRecord,
    KernelTime,
    ProcessFigures,
    add_record,
    read_records,
)
from profiler.runs.model_source import ModelSource
from tests.conftest import FIXTURES, ROOT, default_signals


def record(
    i: int = 0, commit: str = "c01", config: str = "m b bs8 on GPU", gpu=1.0
) -> HistoryRecord:
    return HistoryRecord(
        run_id=f"run{i:04d}",
        config_key=config,
        commit=commit,
        commit_from="--commit",
        created=f"2026-12-01T00:{i // 60:02d}:{i % 60:02d}+00:00",
        machine="host",
        gpu="GPU",
        driver="580.1",
        model="resnet50",
        backend="pytorch_fp16",
        batch_size=8,
        workload="forward",
        steps=3,
        source="/runs/x",
        config={"backend": "pytorch_fp16", "batch_size": 8, "model": "resnet50"},
        model_source=ModelSource("pkg.mod", "/src/pkg/mod.py", "ab" * 32),
        profiler_commit="f" * 40,
        processes=tuple(ProcessFigures(2.0 + j, gpu + j / 100, 0.5, str(j), "0") for j in range(3)),
        categories=(KernelTime("convolution", "convolution", "convolution", 53.0, 800.5),),
        kernels=(KernelTime("sm90_xmma_long_name", "xmma", "convolution", 20.0, 400.25),),
    )


def test_a_record_reads_back_whole_and_is_added_once(tmp_path):
    db = tmp_path / "h.sqlite"
    first = record()
    assert add_record(db, first) is None
    kept = add_record(db, record(commit="other"))  # the same run id: kept, not added
    assert kept is not None and kept.commit == "c01"
    (back,) = read_records(db)
    assert back.added  # stamped when added
    assert back == HistoryRecord(
        **{**{f: getattr(first, f) for f in first.__struct_fields__}, "added": back.added}
    )
    assert back.medians("gpu_time") == [1.0, 1.01, 1.02]
    assert history_store.schema_version(db) == history_store.SCHEMA_VERSION


def test_config_key_and_record_of_a_run_with_a_trace():
    run = FIXTURES / "h200" / "runs" / "pytorch_fp16_bs8"

    class Sink:
        def note(self, text):
            pass

        warn = note

    found = record_of(run, "c07", None, Sink())
    assert found.config_key.startswith("resnet50 pytorch_fp16 bs8 on NVIDIA H200")
    assert found.commit == "c07" and found.commit_from == "--commit"
    assert found.steps and found.categories and 0 < len(found.kernels) <= history_store.TOP_KERNELS
    # per profiled step: the categories add up to the kernels' time of one step
    assert sum(c.us for c in found.categories) >= sum(k.us for k in found.kernels)
    assert all(p.latency_ms for p in found.processes)


def test_two_writers_at_once_lose_nothing(tmp_path):
    db = tmp_path / "h.sqlite"
    child = textwrap.dedent(
        """
        import sys
        sys.path.insert(0, sys.argv[3])
        from tests.test_history_store import record
        from profiler.runs.history_store import add_record
        base = int(sys.argv[2])
        for i in range(base, base + 15):
            add_record(sys.argv[1], record(i, commit=f"c{i}"))
        """
    )
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", child, str(db), str(base), str(ROOT)],
            cwd=ROOT,
            preexec_fn=default_signals,
        )
        for base in (0, 100)
    ]
    assert [w.wait(timeout=120) for w in writers] == [0, 0]
    records = read_records(db)
    assert len(records) == 30
    assert all(len(r.processes) == 3 and len(r.kernels) == 1 for r in records)


def test_a_writer_killed_mid_transaction_leaves_no_part_of_its_record(tmp_path):
    db = tmp_path / "h.sqlite"
    add_record(db, record(0))
    child = textwrap.dedent(
        """
        import sys, time
        sys.path.insert(0, sys.argv[2])
        from tests.test_history_store import record
        from profiler.runs import history_store
        def stop(connection, record_id, rec):
            print("inside", flush=True)
            time.sleep(60)
        history_store._insert_kernels = stop
        history_store.add_record(sys.argv[1], record(1))
        """
    )
    writer = subprocess.Popen(
        [sys.executable, "-c", child, str(db), str(ROOT)],
        cwd=ROOT,
        preexec_fn=default_signals,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert writer.stdout.readline().strip() == "inside"  # its record and processes written
    os.kill(writer.pid, signal.SIGKILL)
    writer.wait(timeout=30)
    assert (tmp_path / "h.sqlite-journal").exists()  # the transaction it left
    assert [r.run_id for r in read_records(db)] == ["run0000"]  # rolled back on opening
    assert add_record(db, record(1)) is None
    assert [len(r.processes) for r in read_records(db)] == [3, 3]
    with sqlite3.connect(db) as connection:
        assert connection.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        assert connection.execute("SELECT COUNT(*) FROM processes").fetchone() == (6,)


def test_an_older_schema_is_upgraded_in_one_transaction(tmp_path, monkeypatch):
    db = tmp_path / "h.sqlite"
    add_record(db, record(0))
    monkeypatch.setattr(history_store, "SCHEMA_VERSION", 2)
    monkeypatch.setitem(
        history_store.MIGRATIONS,
        2,
        "ALTER TABLE records ADD COLUMN nope_table_x TEXT;"
        " ALTER TABLE no_such_table ADD COLUMN x TEXT",
    )
    with pytest.raises(UserError):  # a migration that fails leaves the database as it was
        add_record(db, record(1))
    with sqlite3.connect(db) as connection:
        assert connection.execute("PRAGMA user_version").fetchone() == (1,)
        columns = [row[1] for row in connection.execute("PRAGMA table_info(records)")]
        assert "nope_table_x" not in columns
    with pytest.raises(UserError, match="history schema 1; `history add` upgrades it to 2"):
        read_records(db)
    monkeypatch.setitem(history_store.MIGRATIONS, 2, "ALTER TABLE records ADD COLUMN note TEXT")
    assert add_record(db, record(1)) is None
    assert history_store.schema_version(db) == 2
    assert [r.run_id for r in read_records(db)] == ["run0000", "run0001"]


@pytest.mark.parametrize(
    "content, words",
    [
        (b"not a database at all, just text" * 10, "is not a history database"),
        (None, "has history schema 9; this version reads up to 1: update the profiler"),
    ],
)
def test_a_database_it_cannot_read_is_one_line(tmp_path, cli, content, words):
    db = tmp_path / "h.sqlite"
    if content is None:
        add_record(db, record())
        with sqlite3.connect(db) as connection:
            connection.execute("PRAGMA user_version = 9")
    else:
        db.write_bytes(content)
    done = cli("history", "list", str(db))
    assert done.code == 2
    assert done.stderr.count("\n") == 1 and words in done.stderr, done.stderr
    missing = cli("history", "check", str(tmp_path / "none.sqlite"))
    assert missing.code == 2 and "no history database at" in missing.stderr
