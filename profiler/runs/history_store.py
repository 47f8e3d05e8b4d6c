"""The results history: one SQLite database (the standard library's sqlite3) holding a record
per run, in series of one config each, for `history check` to find change points in.

A record (``HistoryRecord``) is one run: the commit it measured (``--commit``, else git), when
it ran, the machine, GPU and driver, its config key, the per-process medians of latency, GPU time
and enqueue (one row per fresh process: the run's own window, and those of --repeat-runs or a
sweep's --processes), and its kernel table by category plus its top kernels, each as time and
calls per profiled step. It is keyed by the run's id (``run_id``): adding the same run twice
keeps the first.

Schema (``SCHEMA_VERSION``, kept in SQLite's ``user_version``):

- ``records``: one row per run (id, run_id unique, config_key, commit, commit_from, created,
  added, machine, gpu, driver, model, backend, batch_size, workload, steps, source, config_json,
  model_source_json, profiler_commit);
- ``processes``: (record, process) -> latency_ms, gpu_ms, enqueue_ms, round, gpu;
- ``kernels``: (record, kind "category" or "kernel", name) -> label, category, calls, us (per
  profiled step);
- ``confirmations``: what `history confirm` measured for a change (config, the two commits,
  both verdicts as JSON, when).

Writers: each change is one ``BEGIN IMMEDIATE`` transaction on a rollback journal, so two
writers (two CI jobs) queue on SQLite's lock (waiting up to ``BUSY_TIMEOUT_S``), and a writer
killed mid-transaction leaves a journal SQLite rolls back at the next open: the record is
there whole or not at all. A database of an older schema is upgraded in one transaction when
it is opened for writing (``MIGRATIONS``); a newer one is refused in one line. Torch-free.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import stat
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

import msgspec

from profiler import units
from profiler.errors import UserError
from profiler.runs.model_source import ModelSource
from profiler.runs.result import RunResult

#: the schema this version writes (SQLite's user_version); 0 is a new, empty database
SCHEMA_VERSION = 1
#: how long a writer waits for another's transaction to end before giving up
BUSY_TIMEOUT_S = 60.0
#: where `history` and `run --history` look when no database is named
DEFAULT_DB = Path("runs") / "history.sqlite"
#: the run options that decide what is timed, beside model, backend and batch size: a config
#: key names those that differ from their defaults (sampling, output and profiler-schedule
#: options do not change what one call does, and are left out)
KEY_FIELDS = (
    "image_size",
    "seq_len",
    "seed",
    "weights",
    "compile_mode",
    "memory_format",
    "tf32",
    "cudnn_benchmark",
    "workload",
    "src_len",
    "prompt_len",
    "max_new_tokens",
    "cuda_graphs",
    "capture",
    "calib_batches",
)
#: the top kernels a record keeps (the categories are kept whole)
TOP_KERNELS = 25
#: the figures a record keeps per process, as processes.csv names them
FIGURE_COLUMNS = {"latency": "latency_ms", "gpu_time": "gpu_ms", "enqueue": "enqueue_ms"}

_SCHEMA_1 = """
CREATE TABLE records (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id TEXT NOT NULL UNIQUE,
    config_key TEXT NOT NULL,
    commit_id TEXT NOT NULL,
    commit_from TEXT NOT NULL,
    created TEXT NOT NULL,
    added TEXT NOT NULL,
    machine TEXT,
    gpu TEXT,
    driver TEXT,
    model TEXT NOT NULL,
    backend TEXT NOT NULL,
    batch_size INTEGER NOT NULL,
    workload TEXT NOT NULL,
    steps INTEGER,
    source TEXT,
    config_json TEXT NOT NULL,
    model_source_json TEXT,
    profiler_commit TEXT
);
CREATE INDEX records_series ON records (config_key, created);
CREATE TABLE processes (
    record_id INTEGER NOT NULL REFERENCES records (id) ON DELETE CASCADE,
    process INTEGER NOT NULL,
    latency_ms REAL,
    gpu_ms REAL,
    enqueue_ms REAL,
    round TEXT,
    gpu TEXT,
    PRIMARY KEY (record_id, process)
);
CREATE TABLE kernels (
    record_id INTEGER NOT NULL REFERENCES records (id) ON DELETE CASCADE,
    kind TEXT NOT NULL CHECK (kind IN ('category', 'kernel')),
    name TEXT NOT NULL,
    label TEXT NOT NULL,
    category TEXT,
    calls REAL NOT NULL,
    us REAL NOT NULL,
    PRIMARY KEY (record_id, kind, name)
);
CREATE TABLE confirmations (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    config_key TEXT NOT NULL,
    commit_before TEXT NOT NULL,
    commit_after TEXT NOT NULL,
    verdicts_json TEXT NOT NULL,
    how TEXT NOT NULL,
    added TEXT NOT NULL
);
"""

#: version -> the statements that bring a database of version - 1 to it (1: a new database)
MIGRATIONS: dict[int, str] = {1: _SCHEMA_1}


class ProcessFigures(msgspec.Struct, frozen=True, omit_defaults=True):
    """One fresh process of a run: the median of each figure it timed (ms; None: not timed)."""

    latency_ms: float | None = None
    gpu_ms: float | None = None
    enqueue_ms: float | None = None
    round: str | None = None
    gpu: str | None = None

    def figure(self, name: str) -> float | None:
        value: float | None = getattr(self, FIGURE_COLUMNS[name])
        return value


class KernelTime(msgspec.Struct, frozen=True):
    """A category or a kernel of a run's trace: its time and calls per profiled step."""

    name: str
    label: str
    category: str | None
    calls: float
    us: float


class HistoryRecord(msgspec.Struct, frozen=True, kw_only=True):
    """One run as the history keeps it (module doc)."""

    run_id: str
    config_key: str
    commit: str
    #: where the commit came from: "--commit", "git <folder>" or "the run's git"
    commit_from: str
    created: str
    machine: str | None
    gpu: str | None
    driver: str | None
    model: str
    backend: str
    batch_size: int
    workload: str
    #: the profiled steps the kernel times are divided by (None: no trace)
    steps: int | None
    source: str | None
    config: dict[str, Any]
    model_source: ModelSource | None = None
    profiler_commit: str | None = None
    processes: tuple[ProcessFigures, ...] = ()
    categories: tuple[KernelTime, ...] = ()
    kernels: tuple[KernelTime, ...] = ()
    added: str = ""

    def medians(self, figure: str) -> list[float]:
        """The per-process medians of ``figure`` (latency, gpu_time, enqueue), where timed."""
        found = [p.figure(figure) for p in self.processes]
        return [v for v in found if v is not None and v > 0]


class Confirmation(msgspec.Struct, frozen=True):
    """What `history confirm` measured for a change of one config between two commits: both
    verdicts (profiler.analysis.records.TimedVerdicts as JSON) and how the code was had."""

    config_key: str
    commit_before: str
    commit_after: str
    verdicts: dict[str, Any]
    how: str
    added: str


# ---- what a record is keyed by -----------------------------------------------------------------


def run_id(result: RunResult) -> str:
    """A run's identity: its host, its creation time and its name (a re-run writes a new
    ``created``; the same folder added twice is the same run)."""
    parts = (
        result.environment.hostname or "",
        result.created,
        result.run_name,
        result.device,
        result.backend.name,
        str(result.batch_size),
    )
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


def config_key(result: RunResult) -> str:
    """The series a run belongs to: model, backend, batch size, the options of KEY_FIELDS that
    differ from their defaults, and the device (a GPU's name, else the device): runs on two GPU
    models are two series."""
    from profiler.runs.config import RunConfig

    recorded = msgspec.to_builtins(result.config)
    defaults = RunConfig(backend=result.backend.name)
    extras = []
    for name in KEY_FIELDS:
        value = recorded.get(name)
        default = getattr(defaults, name)
        default = str(default) if isinstance(default, Path) else default
        if value is not None and value != default:
            extras.append(f"{name}={value}")
    device = (result.environment.gpu or {}).get("name") or result.device
    words = [result.model, result.backend.name, f"bs{result.batch_size}", *extras]
    return " ".join(words) + f" on {device}"


# ---- the database ------------------------------------------------------------------------------


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime())


def _check_path(path: Path, create: bool) -> None:
    """A database path: a regular file (or, to create, an absent one in a folder that exists)."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        if not create:
            raise UserError(f"no history database at {path} (`history add` creates it)") from None
        if not path.parent.is_dir():
            raise UserError(f"cannot create the history {path}: no folder {path.parent}") from None
        return
    except OSError as error:
        raise UserError(f"cannot read the history {path}: {error.strerror}") from None
    if not stat.S_ISREG(info.st_mode):
        raise UserError(f"the history {path} is not a regular file")


def _connect(path: Path) -> sqlite3.Connection:
    try:
        connection = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
        connection.execute("PRAGMA foreign_keys = ON")
        connection.execute("PRAGMA journal_mode = DELETE")
        return connection
    except sqlite3.DatabaseError as error:
        raise UserError(f"{path} is not a history database ({error})") from None


def _version(connection: sqlite3.Connection, path: Path) -> int:
    try:
        version = int(connection.execute("PRAGMA user_version").fetchone()[0])
        tables = {
            row[0]
            for row in connection.execute("SELECT name FROM sqlite_master WHERE type='table'")
        }
    except sqlite3.DatabaseError as error:
        raise UserError(f"{path} is not a history database ({error})") from None
    if version == 0 and tables:
        raise UserError(f"{path} is an SQLite database, but not a history (no schema version)")
    if version > SCHEMA_VERSION:
        raise UserError(
            f"{path} has history schema {version}; this version reads up to "
            f"{SCHEMA_VERSION}: update the profiler"
        )
    return version


def upgrade(connection: sqlite3.Connection, path: Path) -> int:
    """Bring the database to SCHEMA_VERSION in one transaction (a new one: create it); the
    version it had."""
    connection.execute("BEGIN IMMEDIATE")
    try:
        had = _version(connection, path)
        for version in range(had + 1, SCHEMA_VERSION + 1):
            for statement in MIGRATIONS[version].split(";"):
                if statement.strip():
                    connection.execute(statement)
        connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        connection.execute("COMMIT")
    except BaseException:
        connection.execute("ROLLBACK")
        raise
    return had


@contextmanager
def opened(path: Path, *, write: bool = False) -> Iterator[sqlite3.Connection]:
    """The database at ``path``, upgraded to this schema when opened to ``write`` (created
    when absent); read-only use refuses a missing or older database in one line."""
    path = Path(path)
    _check_path(path, create=write)
    with closing(_connect(path)) as connection:
        try:
            if write:
                upgrade(connection, path)
            elif _version(connection, path) < SCHEMA_VERSION:
                raise UserError(
                    f"{path} has history schema {_version(connection, path)}; "
                    f"`history add` upgrades it to {SCHEMA_VERSION}"
                )
            yield connection
        except sqlite3.OperationalError as error:
            if "locked" in str(error) or "busy" in str(error):
                raise UserError(
                    f"the history {path} stayed locked by another writer for "
                    f"{units.plain(BUSY_TIMEOUT_S)} s ({error})"
                ) from None
            raise UserError(f"the history {path}: {error}") from None
        except sqlite3.DatabaseError as error:
            raise UserError(f"{path} is not a history database ({error})") from None


def _insert_processes(
    connection: sqlite3.Connection, record_id: int, record: HistoryRecord
) -> None:
    connection.executemany(
        "INSERT INTO processes VALUES (?, ?, ?, ?, ?, ?, ?)",
        [
            (record_id, i, p.latency_ms, p.gpu_ms, p.enqueue_ms, p.round, p.gpu)
            for i, p in enumerate(record.processes)
        ],
    )


def _insert_kernels(connection: sqlite3.Connection, record_id: int, record: HistoryRecord) -> None:
    rows = [
        (record_id, kind, k.name, k.label, k.category, k.calls, k.us)
        for kind, table in (("category", record.categories), ("kernel", record.kernels))
        for k in table
    ]
    connection.executemany("INSERT INTO kernels VALUES (?, ?, ?, ?, ?, ?, ?)", rows)


def add_record(path: Path, record: HistoryRecord) -> HistoryRecord | None:
    """Add ``record`` in one transaction; None when added, else the record already kept under
    its run id (nothing is written)."""
    with opened(path, write=True) as connection:
        connection.execute("BEGIN IMMEDIATE")
        try:
            found = connection.execute(
                "SELECT id FROM records WHERE run_id = ?", (record.run_id,)
            ).fetchone()
            if found is not None:
                connection.execute("ROLLBACK")
                return _read(connection, "WHERE r.id = ?", (found[0],))[0]
            cursor = connection.execute(
                "INSERT INTO records (run_id, config_key, commit_id, commit_from, created, added,"
                " machine, gpu, driver, model, backend, batch_size, workload, steps, source,"
                " config_json, model_source_json, profiler_commit)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    record.run_id,
                    record.config_key,
                    record.commit,
                    record.commit_from,
                    record.created,
                    record.added or _now(),
                    record.machine,
                    record.gpu,
                    record.driver,
                    record.model,
                    record.backend,
                    record.batch_size,
                    record.workload,
                    record.steps,
                    record.source,
                    json.dumps(record.config, sort_keys=True, default=str),
                    None
                    if record.model_source is None
                    else msgspec.json.encode(record.model_source).decode(),
                    record.profiler_commit,
                ),
            )
            record_id = int(cursor.lastrowid or 0)
            _insert_processes(connection, record_id, record)
            _insert_kernels(connection, record_id, record)
            connection.execute("COMMIT")
        except BaseException:
            if connection.in_transaction:
                connection.execute("ROLLBACK")
            raise
    return None


def add_confirmation(path: Path, confirmation: Confirmation) -> None:
    with opened(path, write=True) as connection:
        connection.execute(
            "INSERT INTO confirmations (config_key, commit_before, commit_after, verdicts_json,"
            " how, added) VALUES (?, ?, ?, ?, ?, ?)",
            (
                confirmation.config_key,
                confirmation.commit_before,
                confirmation.commit_after,
                json.dumps(confirmation.verdicts, sort_keys=True),
                confirmation.how,
                confirmation.added or _now(),
            ),
        )


_COLUMNS = (
    "r.id, r.run_id, r.config_key, r.commit_id, r.commit_from, r.created, r.added, r.machine,"
    " r.gpu, r.driver, r.model, r.backend, r.batch_size, r.workload, r.steps, r.source,"
    " r.config_json, r.model_source_json, r.profiler_commit"
)


def _read(
    connection: sqlite3.Connection, where: str, arguments: tuple[Any, ...]
) -> list[HistoryRecord]:
    rows = connection.execute(
        f"SELECT {_COLUMNS} FROM records r {where} ORDER BY r.created, r.id", arguments
    ).fetchall()
    processes: dict[int, list[ProcessFigures]] = {}
    kernels: dict[tuple[int, str], list[KernelTime]] = {}
    ids = [row[0] for row in rows]
    for chunk in (ids[i : i + 500] for i in range(0, len(ids), 500)):
        marks = ",".join("?" * len(chunk))
        for rid, lat, gpu_ms, enq, rnd, gpu in connection.execute(
            "SELECT record_id, latency_ms, gpu_ms, enqueue_ms, round, gpu FROM processes"
            f" WHERE record_id IN ({marks}) ORDER BY record_id, process",
            chunk,
        ):
            processes.setdefault(rid, []).append(ProcessFigures(lat, gpu_ms, enq, rnd, gpu))
        for rid, kind, name, label, category, calls, us in connection.execute(
            "SELECT record_id, kind, name, label, category, calls, us FROM kernels"
            f" WHERE record_id IN ({marks}) ORDER BY record_id, kind, us DESC",
            chunk,
        ):
            kernels.setdefault((rid, kind), []).append(KernelTime(name, label, category, calls, us))
    records = []
    for row in rows:
        rid = row[0]
        source = None if row[17] is None else msgspec.json.decode(row[17], type=ModelSource)
        records.append(
            HistoryRecord(
                run_id=row[1],
                config_key=row[2],
                commit=row[3],
                commit_from=row[4],
                created=row[5],
                added=row[6],
                machine=row[7],
                gpu=row[8],
                driver=row[9],
                model=row[10],
                backend=row[11],
                batch_size=int(row[12]),
                workload=row[13],
                steps=row[14],
                source=row[15],
                config=json.loads(row[16]),
                model_source=source,
                profiler_commit=row[18],
                processes=tuple(processes.get(rid, ())),
                categories=tuple(kernels.get((rid, "category"), ())),
                kernels=tuple(kernels.get((rid, "kernel"), ())),
            )
        )
    return records


def read_records(path: Path, config: str | None = None) -> list[HistoryRecord]:
    """Every record (of one config key), in the order they ran (created, then added)."""
    with opened(path) as connection:
        if config is None:
            return _read(connection, "", ())
        return _read(connection, "WHERE r.config_key = ?", (config,))


def config_counts(path: Path) -> dict[str, int]:
    """Config key -> records kept, in key order."""
    with opened(path) as connection:
        rows = connection.execute(
            "SELECT config_key, COUNT(*) FROM records GROUP BY config_key ORDER BY config_key"
        ).fetchall()
    return {str(key): int(count) for key, count in rows}


def read_confirmations(path: Path) -> list[Confirmation]:
    with opened(path) as connection:
        rows = connection.execute(
            "SELECT config_key, commit_before, commit_after, verdicts_json, how, added"
            " FROM confirmations ORDER BY id"
        ).fetchall()
    return [Confirmation(r[0], r[1], r[2], json.loads(r[3]), r[4], r[5]) for r in rows]


def schema_version(path: Path) -> int:
    """The schema version of the database at ``path`` (0: none yet)."""
    with closing(_connect(Path(path))) as connection:
        return _version(connection, Path(path))
