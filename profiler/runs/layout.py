"""Every file and folder name of a run and a sweep, and how traces are found in them.

Layout (``--runs-dir`` and ``--tb-dir`` move the two roots)::

    runs/<run>/result.json         RunResult, read back only through profiler.runs.result
    runs/<run>/latency.csv         one row per timed iteration
    runs/<run>/processes.csv       every timed window of the config in its own process (the run's
                                   own is process 0): process, iteration, latency_ms
    runs/<run>/ncu.csv[.gz]        `profile.py ncu`'s raw metrics
    runs/<run>/graph_captures.json the CUDA graphs the run captured: each node's operator
    runs/<run>/memory_snapshot.pickle  run --memory-history: the allocator's snapshot
    runs/<run>/engine_layers_<i>.json, engine_layer_times_<i>.json   a TensorRT run's engines
    tb_logs/<run>/*.pt.trace.json[.gz]   the run's Kineto traces (named in result.json)
    tb_logs/<run>_tbcompat/        the plugin-friendly copies of those traces (tb-compat)
    runs/<sweep>/sweep.json        SweepManifest, read back only through profiler.runs.manifest
    runs/<sweep>/<cell>/ and tb_logs/<sweep>/<cell>/   a sweep cell's run
    $INFER_PROFILER_CACHE (default <user cache>/infer-profiler/engines, the user cache being
    $XDG_CACHE_HOME or ~/.cache)   compiled engines and other entries
    <that>/../peaks/               `profile.py peaks`' measured ceilings
    <that>/../noise/<kind>.json    `profile.py noise`'s floor and rho of this machine, per machine
                                   kind: a GPU's name, a CPU's model (runs.noise_floor)
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from profiler.errors import UserError
from profiler.fsutil import LEFTOVER

RESULT_FILE = "result.json"
LATENCY_CSV = "latency.csv"
PROCESSES_CSV = "processes.csv"
#: the CUDA graphs a run captured, their nodes and operators (profiler.trace.graphs)
GRAPH_CAPTURES = "graph_captures.json"
#: run --memory-history: torch.cuda.memory._snapshot() of the active steps, pickled as torch
#: writes it (pytorch.org/memory_viz opens it), and the most events it keeps (the allocator's
#: ring buffer: past it, the earliest are dropped)
MEMORY_SNAPSHOT = "memory_snapshot.pickle"
MEMORY_HISTORY_MAX_ENTRIES = 100_000
MANIFEST = "sweep.json"
NCU_CSV_NAMES = ("ncu.csv", "ncu.csv.gz")
RUNS_ROOT, TB_ROOT = "runs", "tb_logs"
TRACE_PATTERNS = ("*.pt.trace.json", "*.pt.trace.json.gz")
LOOSE_PATTERNS = ("*.json", "*.json.gz")
#: files in a run or sweep folder that are never traces, whatever their extension
NOT_TRACES = {RESULT_FILE, MANIFEST, GRAPH_CAPTURES}


#: the environment variable that moves the compiled-engine cache (and peaks/ beside it)
CACHE_ENV_VAR = "INFER_PROFILER_CACHE"
#: the XDG Base Directory variable of the user's cache folder (default ~/.cache)
XDG_CACHE_VAR = "XDG_CACHE_HOME"
#: the tool's folder in the user's cache folder
CACHE_NAME = "infer-profiler"


def user_cache_dir() -> Path:
    """The user's cache folder, as the XDG Base Directory spec (and platformdirs'
    ``user_cache_dir`` on Linux) says: ``$XDG_CACHE_HOME`` when it is set to an absolute path
    (the spec ignores a relative one), else ``~/.cache`` (on every platform: where this tool
    has always kept its cache)."""
    configured = os.environ.get(XDG_CACHE_VAR, "").strip()
    if configured and Path(configured).expanduser().is_absolute():
        return Path(configured).expanduser()
    return Path.home() / ".cache"


def cache_dir() -> Path:
    """``$INFER_PROFILER_CACHE`` if set, else ``<user cache>/infer-profiler/engines``
    (user_cache_dir: ``$XDG_CACHE_HOME``, else ``~/.cache``)."""
    configured = os.environ.get(CACHE_ENV_VAR)
    if configured:
        return Path(configured).expanduser()
    return user_cache_dir() / CACHE_NAME / "engines"


def peaks_dir() -> Path:
    """Where `profile.py peaks` caches its measurements: ``peaks/`` beside the engine cache."""
    return cache_dir().parent / "peaks"


def noise_dir() -> Path:
    """Where `profile.py noise` keeps this machine's noise floor: ``noise/`` beside the engine
    cache, one file per machine kind (a GPU's name, ``CPU <model>``)."""
    return cache_dir().parent / "noise"


#: the folder beside ``tb_logs/<run>/`` that holds tb-compat's copies. A separate folder is a
#: separate run in TensorBoard; two traces in one folder would show as two spans of one worker.
COMPAT_SUFFIX = "_tbcompat"


def compat_dir_for(trace: Path, of_run: bool = False) -> Path:
    """``tb_logs/<run>/x.pt.trace.json.gz`` -> ``tb_logs/<run>_tbcompat/``. A trace in the
    current folder (or at the root) gets a folder of its own beside it:
    ``x.pt.trace.json.gz`` -> ``x_tbcompat/``. ``of_run``: a trace its run's result.json names
    (never a copy, also in the folder of a run named ``..._tbcompat``)."""
    folder = Path(trace).parent
    if folder.name.endswith(COMPAT_SUFFIX) and not of_run:
        raise UserError(f"{trace} is already in a {COMPAT_SUFFIX} folder")
    if not folder.name or folder.resolve() == Path.cwd().resolve():
        stem = Path(trace).name.split(".pt.trace.json")[0].split(".json")[0] or "trace"
        return folder / (stem + COMPAT_SUFFIX)
    return folder.with_name(folder.name + COMPAT_SUFFIX)


def is_leftover(path: str | Path) -> bool:
    """A run's staging folder (``.<run>.partial-*``: half-built, or left by a killed run), a
    replaced run on its way out (``.<run>.old-*``) or a lock file (``.<run>.lock``): never a run,
    a sweep or a trace, whatever it holds."""
    name = Path(path).name
    return bool(LEFTOVER.match(name)) or (name.startswith(".") and name.endswith(".lock"))


def _trace_names(result_json: Path) -> list[str]:
    """The trace file names a result.json lists; tolerant of files that are not RunResults."""
    try:
        data = json.loads(result_json.read_bytes())
    except (OSError, ValueError, RecursionError) as error:
        raise UserError(f"{result_json} is not readable JSON ({error})") from None
    trace = data.get("trace") if isinstance(data, dict) else None
    files = trace.get("files") if isinstance(trace, dict) else None
    if not files:
        return []
    if not isinstance(files, list) or not all(isinstance(name, str) for name in files):
        raise UserError(
            f"{result_json}: trace.files must be a list of file names (got "
            f"{json.dumps(files)[:80]})"
        )
    return files


def traces_named_by_result(folder: Path, root: Path | None = None) -> list[Path]:
    result_json = folder / RESULT_FILE
    if not result_json.is_file():
        return []
    files = _trace_names(result_json)
    if not files:
        return []
    root = Path.cwd() if root is None else root
    found = []
    for name in files:
        p = Path(name)
        # relative names are relative to where `run` was started: usually the folder that holds
        # runs/, so try the run folder's ancestors too (runs/<run>/, runs/<sweep>/<run>/)
        bases = [root, Path.cwd(), folder, *list(folder.resolve().parents)[:4]]
        for candidate in [p] if p.is_absolute() else [base / p for base in bases]:
            if candidate.is_file():
                found.append(candidate)
                break
    if not found:
        raise UserError(f"{result_json} names trace files that do not exist: {', '.join(files)}")
    return found


def traces_in_folder(folder: Path) -> list[Path]:
    """Trace files under ``folder``, outside hidden folders and files: staging folders, replaced
    runs on their way out (see is_leftover) and temporary files are never a trace."""
    for patterns in (TRACE_PATTERNS, LOOSE_PATTERNS):
        try:
            found = sorted(
                {
                    p
                    for pattern in patterns
                    for p in folder.rglob(pattern)
                    if p.is_file()
                    and p.name not in NOT_TRACES
                    and not any(part.startswith(".") for part in p.relative_to(folder).parts)
                }
            )
        except OSError as error:  # /proc and the like: give the folder, not a traceback
            raise UserError(
                f"cannot search {folder} for traces ({error.strerror or error}: "
                f"{error.filename}); give a trace file or a run folder"
            ) from None
        if found:
            return found
    return []


def engine_layer_files(run_dir: Path) -> list[tuple[Path, Path | None]]:
    """A TensorRT run's (engine_layers_<i>.json, engine_layer_times_<i>.json or None), one pair
    per engine."""
    pairs = []
    for layers in sorted(Path(run_dir).glob("engine_layers_*.json")):
        index = layers.stem.rsplit("_", 1)[-1]
        times = Path(run_dir) / f"engine_layer_times_{index}.json"
        pairs.append((layers, times if times.is_file() else None))
    return pairs


def ncu_csv_of(target: str, root: Path | None = None) -> Path | None:
    """``ncu.csv`` for a target: the CSV itself, or the one in the run folder (runs/<run>/, also
    when the target is the run's name, its tb_logs/<run>/ folder or a trace in it)."""
    root = Path.cwd() if root is None else root
    path = Path(target).expanduser()
    if path.is_file() and path.name.endswith((".csv", ".csv.gz")):
        return path
    folders = []
    if path.is_file():  # a trace in tb_logs/<run>/
        folders += [path.parent, path.parent.parent.parent / RUNS_ROOT / path.parent.name]
    elif path.is_dir():
        folders += [path, path.parent.parent / RUNS_ROOT / path.name]
    elif not path.is_absolute() and ".." not in path.parts:  # a run name, as locate() reads it
        folders.append(root / RUNS_ROOT / target)
    for folder in folders:
        for name in NCU_CSV_NAMES:
            if (folder / name).is_file():
                return folder / name
    return None


def _resolved(folder: Path, option: str) -> Path:
    try:
        return Path(folder).resolve()
    except (OSError, RuntimeError) as error:  # a symlink loop
        raise UserError(
            f"{option} {folder} cannot be resolved ({error}); give another folder"
        ) from None


def check_separate_roots(runs_dir: Path, tb_dir: Path) -> None:
    runs_real, tb_real = _resolved(runs_dir, "--runs-dir"), _resolved(tb_dir, "--tb-dir")
    if runs_real == tb_real:
        raise UserError(
            f"--runs-dir and --tb-dir are the same folder ({runs_dir}): the trace "
            "folder would replace the results folder; give them different folders"
        )
    if runs_real in tb_real.parents or tb_real in runs_real.parents:
        raise UserError(
            f"--runs-dir {runs_dir} and --tb-dir {tb_dir} are nested, one inside "
            "the other: a run would replace the other's folder; give separate folders"
        )
