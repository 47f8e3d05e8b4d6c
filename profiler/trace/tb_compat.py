"""A copy of a Kineto trace that torch-tb-profiler 0.4.3 (the last release, 2023) reads right.

The plugin maps each event's ``cat`` through a fixed table (``EventTypeMap`` in its
``profiler/trace.py``) and drops every category it does not know. Three things in current traces
go wrong there:

- ``cuda_runtime`` is not in the table (the plugin knows ``Runtime``/``runtime``), so every CUDA
  runtime call is dropped: the overview's Runtime share reads 0, and kernels are not linked to
  the operators that launched them (the link goes kernel -> correlation -> runtime call ->
  External id -> operator), so the kernel view's "Operator" column says ``CallTreeRoot``;
- ``cuda_driver`` (``cuLaunchKernel``/``cuLaunchKernelEx`` of cuBLAS nvjet, Triton, TensorRT)
  is dropped the same way, so those kernels are not linked either;
- ``gpu_user_annotation`` (the GPU-timeline copy Kineto makes of a ``record_function`` span) is
  read as a CPU ``user_annotation``: a copy named ``ProfilerStep#N`` becomes an extra step, and
  any other copy counts as CPU execution time on a thread that does not exist.

The copy renames categories by the table below and changes nothing else: names, times, ids and
arguments stay as they are, so the plugin's trace view still shows every event. The original
trace is never modified.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import os
import shutil
import stat
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from profiler import signals
from profiler.errors import UserError
from profiler.fsutil import (
    folder_lock,
    is_ours,
    replace_dir,
    staging_dir,
    write_bytes_atomic,
    write_text_atomic,
)

#: ``cat`` in the trace -> ``cat`` in the copy, with why. The plugin lower-cases ``cat`` and
#: looks it up; ``Runtime`` is its own 2021 spelling. A category the plugin does not know is
#: ignored by its analyses but still drawn by its trace view.
CATEGORY_RENAMES: dict[str, tuple[str, str]] = {
    "cuda_runtime": ("Runtime", "CUDA runtime API calls: the plugin only knows 'Runtime'"),
    "cuda_driver": (
        "Runtime",
        "CUDA driver API calls (cuLaunchKernelEx ...): linked to "
        "kernels by correlation id like runtime launches",
    ),
    "gpu_user_annotation": (
        "gpu_user_annotation_tbcompat",
        "GPU-timeline copies of record_function spans: hidden from the "
        "plugin's step and CPU-time analyses, still drawn in its trace view",
    ),
}

COMPAT_KEY = "tbCompat"  # top-level key recording what was changed


@dataclass
class CompatResult:
    source: Path
    written: Path | None  # None: nothing to change, no copy written (the original reads right)
    renamed: dict[str, int] = field(default_factory=dict)  # "old -> new": events


def compat_trace(data: dict[str, Any]) -> dict[str, int]:
    """Rename categories in place (``data`` is a parsed trace); return ``{"old -> new": n}``."""
    events = data.get("traceEvents")
    if not isinstance(events, list):
        raise UserError("not a Kineto/Chrome trace: no traceEvents list")
    counts: Counter[str] = Counter()
    for event in events:
        if not isinstance(event, dict):
            continue
        cat = event.get("cat")
        rename = CATEGORY_RENAMES.get(cat) if isinstance(cat, str) else None
        if rename is not None:
            counts[f"{event['cat']} -> {rename[0]}"] += 1
            event["cat"] = rename[0]
    data[COMPAT_KEY] = {
        "renamed": dict(counts),
        "by": "infer-profiler tb-compat (see profiler/trace/tb_compat.py)",
    }
    return dict(counts)


def write_compat_copy(trace: Path, out_dir: Path, *, unchanged: bool = True) -> CompatResult:
    """Write the plugin-friendly copy of one trace under the same file name (the plugin reads
    ``<worker>.<span>.pt.trace.json[.gz]``), atomically: a temp file the plugin's name pattern
    does not match, then a rename. ``unchanged=False``: no copy of a trace with nothing to
    change (``written`` None)."""
    from profiler.trace.load import read_bytes  # (pandas: not for a run that only checks)

    trace = Path(trace)
    try:
        data = json.loads(read_bytes(trace))
    except ValueError as error:
        raise UserError(f"{trace} is not valid JSON ({error})") from None
    except RecursionError:
        raise UserError(f"{trace} nests JSON lists or objects too deeply to be a trace") from None
    if not isinstance(data, dict):
        raise UserError(f"{trace} is not a trace object")
    counts = compat_trace(data)
    if not counts and not unchanged:
        return CompatResult(source=trace, written=None)
    out_dir = Path(out_dir)
    target = out_dir / trace.name
    if target.resolve() == trace.resolve():
        raise UserError(f"--out would overwrite the original trace {trace}")
    text = json.dumps(data, separators=(",", ":"))
    try:
        if trace.name.endswith(".gz"):
            write_bytes_atomic(target, gzip.compress(text.encode("utf-8"), compresslevel=6))
        else:
            write_text_atomic(target, text)
    except OSError as error:  # --out is a file, a read-only folder, a full disk ...
        raise UserError(f"cannot write {target}: {error.strerror or error}") from None
    return CompatResult(source=trace, written=target, renamed=counts)


# ---- a run's copies: one folder, replaced whole ---------------------------------------------


def check_compat_folder(folder: Path) -> None:
    """Refuse, before anything is written, a folder that cannot take a run's copies: a file or
    a symlink at its place, or a folder this tool did not make holding more than trace files
    (copies of an older version are replaced)."""
    folder = Path(folder)
    try:
        mode = os.lstat(folder).st_mode
    except FileNotFoundError:
        return
    except OSError as error:
        raise UserError(f"cannot read {folder}: {error.strerror}") from None
    if not stat.S_ISDIR(mode):
        raise UserError(
            f"{folder} exists and is not a folder: tb-compat puts the run's copies "
            "there; move it away"
        )
    if is_ours(folder):
        return
    try:
        others = [
            e.name
            for e in folder.iterdir()
            if e.is_symlink() or not e.is_file() or not e.name.endswith((".json", ".json.gz"))
        ]
    except OSError as error:
        raise UserError(f"cannot read {folder}: {error.strerror}") from None
    if others:
        raise UserError(
            f"{folder} holds {others[0]!r}, not tb-compat copies only: it would be "
            "replaced by the run's copies; move it away, or use tb-compat --out"
        )


def write_compat_folder(
    traces: list[Path], folder: Path, *, unchanged: bool = True
) -> list[CompatResult]:
    """The copies of a run's traces as the whole of ``folder`` (``tb_logs/<run>_tbcompat/``):
    written into a staging folder, which then replaces the folder, so it never holds the copy
    of an earlier run beside this one's (TensorBoard would show two spans of one worker). One
    writer at a time (the folder's lock); check_compat_folder's refusals first.
    ``unchanged=False``: when no trace has anything to change, nothing is written (``written``
    None) and the folder stays as it was."""
    folder = Path(folder)
    check_compat_folder(folder)
    with folder_lock(folder, what="copy"):
        stage = staging_dir(folder)
        try:
            done = [write_compat_copy(Path(trace), stage) for trace in traces]
            if not unchanged and not any(r.renamed for r in done):
                return [dataclasses.replace(r, written=None) for r in done]
            with signals.deferred():
                replace_dir(stage, folder)
        finally:
            shutil.rmtree(stage, ignore_errors=True)
    # (a copy has its trace's file name)
    return [dataclasses.replace(r, written=folder / r.source.name) for r in done]


def remove_copies(folder: Path) -> bool:
    """Remove a copy folder this tool made (the copies of a run that was replaced since);
    True when one was removed. A folder another process writes, or not this tool's, stays."""
    folder = Path(folder)
    if not is_ours(folder):
        return False
    try:
        with folder_lock(folder, what="copy"):
            shutil.rmtree(folder, ignore_errors=True)
    except UserError:
        return False
    return not folder.exists()
