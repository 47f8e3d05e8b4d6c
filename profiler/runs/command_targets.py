"""A TARGET on the command line, resolved by one rule set (resolve_target): a file; a folder
(run folder, tb_logs folder, folder of traces); or a name looked up as runs/<name> then
tb_logs/<name> (``<sweep>/<cell>`` included). Analysis gets the paths and never sees these
conventions. Where those traces record different ranks (one trace per rank of a distributed
run: a folder of them, or the run folder of `run --nproc N`, whose result.json names each
rank's, rank_traces), profiler.analysis.rank_run reads them as one rank folder."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from profiler.errors import UserError
from profiler.fsutil import settle
from profiler.runs.layout import (
    COMPAT_SUFFIX,
    RESULT_FILE,
    RUNS_ROOT,
    TB_ROOT,
    is_leftover,
    traces_in_folder,
    traces_named_by_result,
)
from profiler.runs.result import RunResult, read_result


@dataclass
class Target:
    path: Path  # the trace to summarize
    traces: list[Path]  # every trace of the target (one per profiler cycle with --repeat)
    note: str | None = None  # e.g. which of several traces was picked
    result_json: Path | None = None  # the run's result.json, when the target is a run folder
    result: RunResult | None = None  # what it says, when it reads


def locate(target: str, root: Path | None = None) -> Path:
    """TARGET as given when it exists, else runs/<target> then tb_logs/<target> (a run name or
    ``<sweep>/<cell>``; never an absolute path or one with ``..``)."""
    root = Path.cwd() if root is None else root
    path = Path(target).expanduser()
    if any(is_leftover(part) for part in Path(target).parts):
        raise UserError(f"{target} is a staging folder or lock of an unfinished run, not a run")
    if not path.is_file():  # a run killed while its folders were replaced: finished first
        settle(path)
    if not path.exists() and not path.is_absolute() and ".." not in Path(target).parts:
        for base in (RUNS_ROOT, TB_ROOT):
            settle(root / base / target)
            if (root / base / target).exists():
                return root / base / target
    if not path.exists():
        raise UserError(
            _unfinished_cell(target, [path, root / RUNS_ROOT / target])
            or f"no such file, folder or run: {target} (looked in runs/ and tb_logs/ too)"
        )
    return path


def _unfinished_cell(target: str, candidates: list[Path]) -> str | None:
    """Why TARGET has no folder when it names a cell of a sweep that did not finish it (failed,
    interrupted, or listed running by a sweep that is gone: profiler.runs.manifest
    .settle_running); None otherwise."""
    from profiler.runs.manifest import OK, RUNNING, is_sweep_dir, read_manifest, settle_running

    for candidate in candidates:
        folder = candidate.parent
        if not is_sweep_dir(folder):
            continue
        try:
            manifest = read_manifest(folder)
        except UserError:
            continue
        cell = None if manifest is None else manifest.cells.get(candidate.name)
        if manifest is None or cell is None or cell.status == OK:
            continue
        settle_running(folder, manifest)
        if cell.status == RUNNING:
            return f"{target} is a cell the sweep {folder} is running now: not finished yet"
        return (
            f"{target} is a cell of the sweep {folder} that did not finish ({cell.status}"
            + (f": {cell.reason}" if cell.reason else "")
            + ")"
            + ("" if "--resume" in (cell.reason or "") else "; `sweep --resume` runs it again")
        )
    return None


def resolve_target(target: str, root: Path | None = None) -> Target:
    """A trace file; a run folder (result.json naming its traces); a folder of traces; or a run
    name (see locate). Several traces: the newest is summarized, and the note says so."""
    root = Path.cwd() if root is None else root
    path = locate(target, root)
    if path.is_file():
        return Target(path, [path])
    candidates = traces_named_by_result(path, root) or traces_in_folder(path)
    if not candidates:
        raise UserError(
            f"no trace files in {path}: expected *.pt.trace.json[.gz] or a result.json naming them"
        )
    result_json = path / RESULT_FILE if (path / RESULT_FILE).is_file() else None
    result, unread = None, None
    if result_json:
        try:
            result = read_result(result_json)
        except UserError as error:  # the traces still show; say why the run's figures do not
            unread = f"warning: {error}; the timed window, config and roofline are not shown"
    if len(candidates) == 1:
        return Target(
            candidates[0], candidates, note=unread, result_json=result_json, result=result
        )
    newest = max(candidates, key=lambda p: p.stat().st_mtime)
    note = f"{len(candidates)} traces in {path}; using the newest, {newest.name}"
    return Target(
        newest,
        candidates,
        note="\n".join(filter(None, (unread, note))),
        result_json=result_json,
        result=result,
    )


def rank_traces(target: str, root: Path | None = None) -> list[Path]:
    """Every rank's traces of a `run --nproc N` run folder (its result.json's ``ranks`` block),
    in the order it lists them; [] for any other TARGET (a trace, a folder of traces, a run of
    one process, a result.json that does not read)."""
    import json

    root = Path.cwd() if root is None else root
    path = locate(target, root)
    result_json = path / RESULT_FILE
    if not path.is_dir() or not result_json.is_file():
        return []
    try:
        data = json.loads(result_json.read_bytes())
    except (OSError, ValueError, RecursionError):
        return []
    block = data.get("ranks") if isinstance(data, dict) else None
    ranks = block.get("ranks") if isinstance(block, dict) else None
    names = [
        name
        for rank in (ranks if isinstance(ranks, list) else [])
        if isinstance(rank, dict) and isinstance(rank.get("trace_files"), list)
        for name in rank["trace_files"]
        if isinstance(name, str)
    ]
    found = []
    for name in names:  # relative to where `run` started, as traces_named_by_result reads them
        bases = [root, Path.cwd(), path, *list(path.resolve().parents)[:4]]
        candidates = [Path(name)] if Path(name).is_absolute() else [b / name for b in bases]
        hit = next((c for c in candidates if c.is_file()), None)
        if hit is not None:
            found.append(hit)
    return found if len(found) > 1 else []


@dataclass
class TraceSet:
    """The traces of a TARGET, and what they are."""

    traces: list[Path]
    of_run: bool  # named by the run's result.json: the run's own, whatever its folder's name
    one_file: bool  # TARGET was one trace file


def trace_set(target: str, root: Path | None = None) -> TraceSet:
    """Every trace of TARGET (resolved as resolve_target does), leaving out tb-compat copies
    found in a folder (the traces a run's result.json names are never copies, also in the
    folder of a run named ``..._tbcompat``): all traces of a run are converted by tb-compat
    (one per profiler cycle with --repeat)."""
    path = locate(target, root)
    if path.is_file():
        return TraceSet([path], of_run=False, one_file=True)
    named = traces_named_by_result(path, root)
    found = named or [
        p for p in traces_in_folder(path) if not p.parent.name.endswith(COMPAT_SUFFIX)
    ]
    if not found:
        raise UserError(f"no trace files in {path}")
    return TraceSet(found, of_run=bool(named), one_file=False)


def traces_of(target: str, root: Path | None = None) -> list[Path]:
    """trace_set's traces."""
    return trace_set(target, root).traces
