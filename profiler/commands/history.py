"""`history add | check | confirm | list`: runs and sweeps recorded into the results history
(profiler.runs.history_store), change points found in each config's series of commits
(profiler.analysis.change_points), re-timed to confirm them, and the CI gate's exit status."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from profiler.commands.sink import Sink
from profiler.errors import UserError, first_line
from profiler.runs.history_store import HistoryRecord
from profiler.runs.result import RunResult

if TYPE_CHECKING:
    from profiler.analysis.change_points import Gate
    from profiler.analysis.history_records import ChangePoint, SeriesSummary
    from profiler.runs.samples import ProcessWindow

#: the longest commit name taken (a SHA-1 is 40 characters, a tag or a CI build id a few more)
MAX_COMMIT_CHARS = 200
#: the run options a confirmation's processes take from the record and which they set
#: themselves (where results go, how many processes)
CONFIRM_SETS = ("name", "runs_dir", "tb_dir", "replace", "repeat_runs", "target_noise", "budget")
#: a re-timing process's stderr lines kept for its error
ERROR_LINES = 3


# ---- history add ------------------------------------------------------------------------------


def _git_head(folder: Path) -> str | None:
    try:
        done = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=folder,
            capture_output=True,
            text=True,
            timeout=20,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    head = done.stdout.strip()
    return head if done.returncode == 0 and re.fullmatch(r"[0-9a-f]{7,64}", head) else None


def checked_commit(commit: str, option: str = "--commit") -> str:
    """A commit as given (--commit, or ``option``): one line of printable text, at most
    MAX_COMMIT_CHARS."""
    if not commit.strip() or len(commit) > MAX_COMMIT_CHARS or re.search(r"[\x00-\x1f]", commit):
        raise UserError(
            f"{option} must be one line of 1 to {MAX_COMMIT_CHARS} printable characters "
            f"(got {commit[:60]!r})"
        )
    return commit.strip()


def resolve_commit(result: RunResult, commit: str | None, repo: Path | None) -> tuple[str, str]:
    """The commit a run measured and where it came from: --commit; else the git HEAD of
    --repo, of the folder of a package.module:function model's file, or of the current folder;
    else the git commit the run recorded (this profiler's checkout)."""
    if commit is not None:
        return checked_commit(commit), "--commit"
    folders = [repo] if repo is not None else []
    if repo is None and result.model_source is not None:
        folders.append(Path(result.model_source.path).parent)
    if repo is None:
        folders.append(Path.cwd())
    for folder in folders:
        head = _git_head(folder) if folder.is_dir() else None
        if head is not None:
            return head, f"git {folder}"
    if repo is not None:
        raise UserError(f"--repo {repo}: not a git checkout with a commit (git rev-parse HEAD)")
    recorded = (result.environment.git or {}).get("commit")
    if isinstance(recorded, str) and recorded:
        return recorded, "the run's git"
    raise UserError(
        f"no commit for {result.run_name}: pass --commit, or add it from the model's git "
        "checkout (--repo)"
    )


def _kernel_tables(
    run_dir: Path, result: RunResult, sink: Sink
) -> tuple[int | None, tuple[Any, ...], tuple[Any, ...]]:
    """(profiled steps, categories, top kernels) of the run's trace, per step; (None, (), ())
    without a trace (said in a note)."""
    from profiler.analysis.run_analysis import RunAnalysis
    from profiler.runs.history_store import TOP_KERNELS, KernelTime

    if result.trace.skipped or not result.trace.files:
        sink.note(f"{run_dir}: no trace ({result.trace.skipped or 'none named'}): no kernel table")
        return None, (), ()
    try:
        summary = RunAnalysis(run_dir).summary
    except UserError as error:
        sink.warn(f"{run_dir}: its trace is not recorded ({error})")
        return None, (), ()
    steps = len(summary.overview.steps)
    if not steps:
        sink.warn(f"{run_dir}: its trace has no profiled step: no kernel table recorded")
        return None, (), ()
    categories = tuple(
        KernelTime(
            str(r.category), str(r.category), str(r.category), r.calls / steps, r.total_us / steps
        )
        for r in summary.kernels.categories.itertuples()
    )
    kernels = tuple(
        KernelTime(str(r.name), str(r.kernel), str(r.category), r.calls / steps, r.total_us / steps)
        for r in summary.kernels.table.head(TOP_KERNELS).itertuples()
    )
    return steps, categories, kernels


def record_of(run_dir: Path, commit: str | None, repo: Path | None, sink: Sink) -> HistoryRecord:
    """A run folder as the history keeps it."""
    import msgspec

    from profiler.runs import history_store
    from profiler.runs.layout import RESULT_FILE
    from profiler.runs.result import read_result
    from profiler.runs.samples import config_samples

    result_json = run_dir / RESULT_FILE
    result = read_result(result_json)
    found, where = resolve_commit(result, commit, repo)
    samples = config_samples(result, result_json).for_verdict()
    processes = tuple(
        history_store.ProcessFigures(
            w.median("latency"), w.median("gpu_time"), w.median("enqueue"), w.round, w.gpu
        )
        for w in samples.windows
    )
    if not processes:
        raise UserError(f"{run_dir}: no timed window (latency.csv or processes.csv) to record")
    steps, categories, kernels = _kernel_tables(run_dir, result, sink)
    gpu = result.environment.gpu or {}
    return HistoryRecord(
        run_id=history_store.run_id(result),
        config_key=history_store.config_key(result),
        commit=found,
        commit_from=where,
        created=result.created,
        machine=result.environment.hostname,
        gpu=gpu.get("name"),
        driver=gpu.get("driver"),
        model=result.model,
        backend=result.backend.name,
        batch_size=result.batch_size,
        workload=result.workload,
        steps=steps,
        source=str(run_dir.resolve()),
        config=msgspec.to_builtins(result.config),
        model_source=result.model_source,
        profiler_commit=(result.environment.git or {}).get("commit"),
        processes=processes,
        categories=categories,
        kernels=kernels,
    )


def run_folders(target: str) -> list[Path]:
    """A run folder, a run name under runs/, or a sweep (its finished cells) -> run folders."""
    from profiler.runs.command_targets import locate
    from profiler.runs.layout import RESULT_FILE
    from profiler.runs.manifest import OK, find_sweep, grid_cells
    from profiler.sweep.record import read_manifest

    sweep = find_sweep(target)
    if sweep is not None:
        manifest = read_manifest(sweep)
        if manifest is None:
            raise UserError(f"{sweep}: no sweep.json")
        cells = [sweep / name for name, cell in grid_cells(manifest) if cell.status == OK]
        if not cells:
            raise UserError(f"sweep {sweep}: no finished cell to record")
        return cells
    path = locate(target)
    if path.is_file() and path.name == RESULT_FILE:
        path = path.parent
    if not (path / RESULT_FILE).is_file():
        raise UserError(f"{target}: not a run folder (no {RESULT_FILE}) nor a sweep")
    return [path]


def add(db: Path, targets: list[str], commit: str | None, repo: Path | None, sink: Sink) -> int:
    """Record each target's runs; one line per run (added, or kept already)."""
    from profiler.runs.history_store import add_record

    if commit is not None:
        checked_commit(commit)
    folders = [folder for target in targets for folder in run_folders(target)]
    added = 0
    for folder in folders:
        record = record_of(folder, commit, repo, sink)
        kept = add_record(db, record)
        if kept is None:
            added += 1
            sink.line(
                f"added {folder} to {db}: {record.config_key}, commit {record.commit} "
                f"({record.commit_from}), {len(record.processes)} process(es), "
                f"{len(record.kernels)} kernels"
            )
        else:
            sink.line(
                f"{folder} is in {db} already (run {record.run_id}, commit {kept.commit}): "
                "not added again"
            )
    sink.note(f"{added} of {len(folders)} run(s) added to {db}")
    return 0


def add_after(db: Path | None, targets: list[Path], commit: str | None, sink: Sink) -> None:
    """run/sweep --history DB: their runs recorded as they finish (nothing without DB)."""
    if db is None:
        return
    add(db, [str(t) for t in targets], commit, None, sink)


# ---- history check -------------------------------------------------------------------------


def up_to(records: list[HistoryRecord], until: str) -> list[HistoryRecord] | None:
    """A series as it stood at commit ``until``: the records of its commits up to that one (in
    the order the commits first ran); None when the series does not hold it."""
    from profiler.analysis.change_points import commits_of

    names = [c.commit for c in commits_of(records)]
    if until not in names:
        return None
    kept = set(names[: names.index(until) + 1])
    return [r for r in records if r.commit in kept]


def checked(
    db: Path, config: str | None, gate: Gate, sink: Sink, until: str | None = None
) -> tuple[list[SeriesSummary], list[ChangePoint]]:
    """Every series of the database (or the one of ``config``) and its change points, numbered
    in config-key order: (series summaries, changes). With ``until``, each series as it stood
    at that commit: its later commits left out (a series without it is not checked), and the
    confirmations added after the last record kept."""
    from profiler.analysis.change_points import check_series
    from profiler.runs.history_store import config_counts, read_confirmations, read_records

    counts = config_counts(db)
    if config is not None and config not in counts:
        known = "; ".join(list(counts)[:5]) or "none"
        raise UserError(f"no config {config!r} in {db} (it holds: {known})")
    confirmations = read_confirmations(db)
    series: list[SeriesSummary] = []
    changes: list[ChangePoint] = []
    keys = [config] if config is not None else list(counts)
    records = {key: read_records(db, key) for key in keys}
    if until is not None:
        cut = {key: up_to(found, until) for key, found in records.items()}
        records = {key: found for key, found in cut.items() if found is not None}
        if not records:
            raise UserError(f"--until {until}: no such commit in {db}")
        if len(records) < len(keys):
            sink.note(f"--until {until}: {len(keys) - len(records)} series without it not checked")
        last = max(r.added for found in records.values() for r in found)
        confirmations = [c for c in confirmations if c.added <= last]
    for key, found_records in records.items():
        summary, found = check_series(
            key,
            found_records,
            gate=gate,
            confirmations=confirmations,
            first_number=len(changes) + 1,
        )
        series.append(summary)
        changes.extend(found)
    return series, changes


def check(
    db: Path,
    *,
    config: str | None,
    figure: str,
    max_slowdown: float,
    recent: int,
    since: str | None,
    markdown: Path | None,
    junit: Path | None,
    sink: Sink,
    until: str | None = None,
) -> int:
    """Change points of every series, one line each; the gate's exit status: 1 when a change
    among those it looks at is a regression beyond --max-slowdown on --figure (unless `history
    confirm` refuted it), else 0. Writes the Markdown summary (--markdown, and
    $GITHUB_STEP_SUMMARY where set) and JUnit XML (--junit). With --until, each series as it
    stood at that commit: the check a CI job ran then, replayed."""
    from profiler.analysis.change_points import METHOD, Gate, failing
    from profiler.analysis.history_records import HistoryCheck
    from profiler.analysis.records import plain
    from profiler.report import history_view
    from profiler.runs.history_store import schema_version

    if figure not in ("gpu_time", "latency"):
        raise UserError(f"--figure is gpu_time or latency (got {figure!r})")
    if not 0 <= max_slowdown < 100:
        raise UserError(f"--max-slowdown is a percentage from 0 to 100 (got {max_slowdown})")
    if recent < 1:
        raise UserError(f"--recent must be 1 or more (got {recent})")
    if since is not None:
        since = checked_commit(since, "--since")
    if until is not None:
        until = checked_commit(until, "--until")
    gate = Gate(figure, max_slowdown / 100, recent, since)  # type: ignore[arg-type]
    series, changes = checked(db, config, gate, sink, until)
    if since is not None and not any(
        since in (r.commit for r in _records_of(db, s.config)) for s in series
    ):
        raise UserError(f"--since {since}: no such commit in {db}")
    bad = failing(changes)
    report = HistoryCheck(
        database=str(db),
        schema_version=schema_version(db),
        method=METHOD,
        figure=gate.figure,
        max_slowdown_pct=max_slowdown,
        series=series,
        changes=changes,
        failing=bad,
        exit_status=1 if bad else 0,
    )
    text = history_view.markdown(report, gate)
    targets = [markdown] if markdown is not None else []
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary:
        targets.append(Path(summary))
    for path in targets:
        _write_text(path, text, append=path != markdown)
        sink.note(f"wrote the Markdown summary to {path}")
    if junit is not None:
        from profiler.fsutil import write_text_atomic

        write_text_atomic(junit, history_view.junit(report, gate))
        sink.note(f"wrote JUnit XML to {junit}")
    if sink.json:
        sink.document("history-check", plain(report))
    else:
        history_view.print_check(report, gate, sink.console)
    for line in history_view.gate_lines(report, gate):
        (sink.error if bad else sink.note)(line)
    return report.exit_status


def _records_of(db: Path, config: str) -> list[HistoryRecord]:
    from profiler.runs.history_store import read_records

    return read_records(db, config)


def _write_text(path: Path, text: str, append: bool) -> None:
    """The Markdown summary: written whole (--markdown), or appended ($GITHUB_STEP_SUMMARY, a
    file the CI runner gathers the steps' summaries in)."""
    if append:
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(text)
        return
    from profiler.fsutil import write_text_atomic

    write_text_atomic(path, text)


def list_series(db: Path, sink: Sink) -> int:
    """The configs of the database, each with its records and commits."""
    from profiler.runs.history_store import config_counts, read_records, schema_version

    counts = config_counts(db)
    sink.line(f"{db}: history schema {schema_version(db)}, {len(counts)} config(s)")
    for key, count in counts.items():
        records = read_records(db, key)
        commits = list(dict.fromkeys(r.commit for r in records))
        sink.line(
            f"  {key}: {count} record(s), {len(commits)} commit(s), {commits[0]} .. {commits[-1]}"
        )
    return 0


# ---- history confirm -----------------------------------------------------------------------


def _side_command(
    label: str,
    cmd: str | None,
    tree: Path | None,
    record: HistoryRecord,
) -> tuple[list[str], Path | None, str]:
    """How side ``label``'s code is run: (the argv that starts `profile.py`, the folder it runs
    in, the words saying so). Refused in one line when the commit's code is not at hand."""
    if cmd is not None and tree is not None:
        raise UserError(f"--{label}-cmd and --{label}-tree exclude each other")
    if cmd is not None:
        argv = shlex.split(cmd)
        if not argv:
            raise UserError(f"--{label}-cmd is empty")
        return argv, None, f"--{label}-cmd {cmd}"
    if tree is not None:
        if not tree.is_dir():
            raise UserError(f"--{label}-tree {tree}: no such folder")
        own = tree / "profile.py"
        argv = [sys.executable, str(own if own.is_file() else _this_profile())]
        return argv, tree, f"--{label}-tree {tree}"
    source = record.model_source
    if source is not None:
        from profiler.runs.model_source import digest

        path = Path(source.path)
        now = digest(path) if path.is_file() else None
        if now == source.sha256:
            root = path.parents[source.module.count(".")]
            return [sys.executable, str(_this_profile())], root, f"the recorded model file {path}"
        why = "is gone" if now is None else "has changed since (its SHA-256 differs)"
        raise UserError(
            f"cannot re-time commit {record.commit}: its model file {path} {why}; check the "
            f"commit out and pass --{label}-tree DIR, or --{label}-cmd"
        )
    raise UserError(
        f"cannot re-time commit {record.commit}: {record.model} is a built-in model, whose code "
        f"is the profiler's own (profiler commit {record.profiler_commit or 'not recorded'}); "
        f"pass --{label}-tree (a checkout of that commit) or --{label}-cmd (a command that "
        "starts its profile.py)"
    )


def _this_profile() -> Path:
    from profiler import SOURCE_ROOT

    return Path(SOURCE_ROOT) / "profile.py"


def run_argv(config: dict[str, Any], out: Path, name: str) -> list[str]:
    """`run`'s arguments that time ``config`` (a record's) once, into ``out``."""
    from profiler.runs.config import run_options

    options = run_options()
    argv = ["run"]
    for key, value in config.items():
        if key in options and key not in CONFIRM_SETS:
            argv += options[key].argv(value)
    return [
        *argv,
        "--runs-dir",
        str(out / "runs"),
        "--tb-dir",
        str(out / "tb_logs"),
        "--name",
        name,
        "--json",
    ]


def _env_for(cwd: Path | None) -> dict[str, str] | None:
    """A re-timing process's environment: a checkout's (or a model file's) folder first on
    PYTHONPATH, so that a package.module:function model imports from it."""
    if cwd is None:
        return None
    inherited = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(cwd), inherited]))}


def time_once(argv: list[str], cwd: Path | None, round_id: str, label: str) -> ProcessWindow:
    """One fresh process of one side: its window (latency, GPU time, enqueue per iteration)."""
    from profiler.runs.result import result_from_dict
    from profiler.runs.samples import read_own_window

    try:
        done = subprocess.run(
            argv, cwd=cwd, env=_env_for(cwd), capture_output=True, text=True, timeout=3600
        )
    except (OSError, subprocess.SubprocessError) as error:
        raise UserError(
            f"{label}: {shlex.join(argv[:3])} could not run ({first_line(error)})"
        ) from None
    if done.returncode != 0:
        tail = " | ".join(done.stderr.strip().splitlines()[-ERROR_LINES:])
        raise UserError(f"{label}: the re-timing run exited {done.returncode}: {tail[:400]}")
    try:
        result = result_from_dict(json.loads(done.stdout), f"{label}'s run --json")
    except ValueError:
        raise UserError(f"{label}: the re-timing run printed no run result (--json)") from None
    latency = Path(result.latency_csv)
    if cwd is not None and not latency.is_absolute():
        latency = cwd / latency
    import msgspec

    return msgspec.structs.replace(read_own_window(latency), round=round_id)


def confirm(
    db: Path,
    change: int,
    *,
    config: str | None,
    a_cmd: str | None,
    b_cmd: str | None,
    a_tree: Path | None,
    b_tree: Path | None,
    processes: int,
    reach: int,
    same_within: float,
    sink: Sink,
) -> int:
    """Re-time change ``change`` (as `history check` numbers it): the commit ``reach`` before
    its last one (A) against the one ``reach`` after its first (B), in ``processes`` fresh
    processes each, interleaved (A B, B A ...); both verdicts, kept in the database for
    `history check`."""
    from profiler.analysis.change_points import Gate, commits_of
    from profiler.analysis.records import plain
    from profiler.analysis.timed_verdict import judge
    from profiler.report import history_view
    from profiler.runs.history_store import Confirmation, add_confirmation
    from profiler.runs.samples import ConfigSamples

    if processes < 2:
        raise UserError(f"--processes must be 2 or more (got {processes})")
    if reach < 0:
        raise UserError(f"--reach must be 0 or more (got {reach})")
    if not 0 <= same_within < 100:
        raise UserError(f"--same-within is a percentage from 0 to 100 (got {same_within})")
    _, changes = checked(db, config, Gate(), sink)
    chosen = next((c for c in changes if c.number == change), None)
    if chosen is None:
        raise UserError(
            f"no change {change} in {db}: `history check` found {len(changes)}"
            + (f" for {config}" if config else "")
        )
    commits = commits_of(_records_of(db, chosen.config))
    a = commits[max(chosen.index - 1 - reach, 0)]
    b = commits[min(chosen.index + reach, len(commits) - 1)]
    sides = []
    for label, cmd, tree, commit in (("a", a_cmd, a_tree, a), ("b", b_cmd, b_tree, b)):
        argv, cwd, how = _side_command(label, cmd, tree, commit.records[-1])
        sides.append((label.upper(), argv, cwd, how, commit))
    sink.note(
        f"change {change} ({chosen.config}): re-timing commit {a.commit} (A: {sides[0][3]}) "
        f"against {b.commit} (B: {sides[1][3]}), {processes} fresh processes each, interleaved"
    )
    windows: dict[str, list[Any]] = {"A": [], "B": []}
    with tempfile.TemporaryDirectory(prefix="history_confirm_") as scratch:
        for i in range(processes):
            for label, argv, cwd, _, commit in sides if i % 2 == 0 else sides[::-1]:
                out = Path(scratch) / label
                run = run_argv(commit.records[-1].config, out, f"confirm{i}")
                windows[label].append(time_once([*argv, *run], cwd, str(i), label))
            sink.note(f"round {i + 1} of {processes} timed")
    verdicts = judge(
        ConfigSamples(tuple(windows["A"])),
        ConfigSamples(tuple(windows["B"])),
        tolerance=same_within / 100,
    )
    if verdicts is None:
        raise UserError("the re-timing runs recorded no latency")
    confirmation = Confirmation(
        chosen.config,
        chosen.commit_before,
        chosen.commit_after,
        {"gpu_time": plain(verdicts.gpu_time), "latency": plain(verdicts.latency)},
        f"A {a.commit}: {sides[0][3]}; B {b.commit}: {sides[1][3]}; {processes} processes each",
        "",
    )
    add_confirmation(db, confirmation)
    history_view.print_confirmation(chosen, a.commit, b.commit, verdicts, sink.console)
    sink.note(f"kept in {db}: `history check` marks change {change} with it")
    return 0
