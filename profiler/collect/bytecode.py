"""Keep compiled bytecode between runs where the environment says not to write it.

Python compiles every module it imports to bytecode and, unless told not to, keeps the result in
``__pycache__`` beside the source. Containers often set ``PYTHONDONTWRITEBYTECODE=1`` (the GPU
machine this project is measured on does): then every process compiles torch, torchvision and
their dependencies again. Measured on an H100 host: ``builtins.compile`` took 7.6 s of a 16 s
eager ResNet50 run (2,437 modules), and the run took 19.5 s cold, 5.3-7.2 s once the bytecode
was kept. So the entry point, the sweep worker and the Ray cell task keep it under the cache
folder (``<cache>/pycache``, never beside
the sources, which is what the variable usually protects), unless
``INFER_PROFILER_PYCACHE=off`` asks for the environment's behaviour. A prefix the user set
(``PYTHONPYCACHEPREFIX``) is left alone.

The first process on a fresh machine still compiles everything it imports, one module after
another. ``precompile`` shortens that: a detached process compiles, on all cores but one, the
folders a run imports from (``import_dirs.DIRS``, in the order a run first imports from them),
into the same cache folder, while the run imports; whatever it has compiled by the time the
import reaches a module is read instead of compiled. ``stop_precompile`` ends it before the
measured windows (nothing runs beside them); what it left undone, the next run's imports or
precompile finish. A folder marker says when every listed folder is done.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

OPT_OUT = "INFER_PROFILER_PYCACHE"
#: in the cache's pycache folder: every folder of import_dirs.DIRS compiled for this interpreter
DONE_MARKER = f".precompiled-{sys.implementation.cache_tag}"
#: in the same folder: held (flock) by the compiling process, which writes its pid into it
LOCK = ".precompiling"
#: what the compiling process runs (python -m MODULE PREFIX)
MODULE = "profiler.collect.bytecode"

_precompiling: subprocess.Popen | None = None


def keep_bytecode(environ=os.environ) -> Path | None:
    """Set ``sys.pycache_prefix`` to the cache folder's ``pycache`` when bytecode would not be
    written; returns that folder, or None when nothing changed. Call before the heavy imports."""
    if environ.get(OPT_OUT, "").strip().lower() in ("0", "off", "no", "false"):
        return None
    if not sys.dont_write_bytecode or sys.pycache_prefix is not None:
        return None
    from profiler.collect.engine_cache import entries_dir

    folder = entries_dir(None, "pycache")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:  # an unwritable cache: compile as the environment asked
        return None
    sys.pycache_prefix = str(folder)
    sys.dont_write_bytecode = False
    return folder


def roots() -> dict[str, Path]:
    """The roots import_dirs.DIRS names folders under: the libraries, the standard library and
    this project."""
    import sysconfig

    paths = sysconfig.get_paths()
    return {
        "site": Path(paths["purelib"]),
        "platsite": Path(paths["platlib"]),
        "stdlib": Path(paths["stdlib"]),
        "project": Path(__file__).resolve().parents[2],
    }


def folders(listed: tuple[str, ...] | None = None) -> list[Path]:
    """The folders a run imports from, in first-import order, that exist here (another version of
    a library may lack some): ``root:relative/folder`` resolved against ``roots()``."""
    if listed is None:
        from profiler.collect.import_dirs import DIRS

        listed = DIRS
    where = roots()
    found: dict[Path, None] = {}
    for entry in listed:
        root, _, relative = entry.partition(":")
        bases = [where["site"], where["platsite"]] if root == "site" else [where[root]]
        for base in bases:
            if (base / relative).is_dir():
                found.setdefault(base / relative)
    return list(found)


def precompile(environ=os.environ) -> bool:
    """Start compiling the folders a run imports from in a detached process, when bytecode goes
    to our cache folder (``keep_bytecode``) and that folder is not complete yet. True when
    started. Call after ``keep_bytecode``, before the heavy imports; ``stop_precompile`` ends it."""
    from profiler import child_env

    global _precompiling
    prefix = sys.pycache_prefix
    if (
        _precompiling is not None
        or prefix is None
        or not prefix.endswith("pycache")
        or environ.get(OPT_OUT, "").strip().lower() in ("0", "off", "no", "false")
        or (Path(prefix) / DONE_MARKER).exists()
    ):
        return False
    try:
        _precompiling = subprocess.Popen(
            [sys.executable, "-m", MODULE, prefix],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            env=child_env(),
        )
    except OSError:
        return False
    return True


def stop_precompile() -> None:
    """End the background compilation (its process group: the compiling workers too), this
    process's or another's (a sweep's workers start together: one of them started it, and
    none of them times a window beside it)."""
    global _precompiling
    process, _precompiling = _precompiling, None
    if process is None or process.poll() is not None:
        _stop_another()
        return
    import signal

    try:
        os.killpg(process.pid, signal.SIGTERM)
    except OSError:
        pass
    try:
        process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass


def _stop_another() -> None:
    """The compilation another process started, by the pid it wrote into its lock file, when
    that pid is still a compilation (its command line says so)."""
    import signal

    if sys.pycache_prefix is None:
        return
    try:
        pid = int((Path(sys.pycache_prefix) / LOCK).read_text().strip() or 0)
        running = Path(f"/proc/{pid}/cmdline").read_bytes() if pid > 0 else b""
    except (OSError, ValueError):
        return
    if pid != os.getpid() and MODULE.encode() in running:
        try:
            os.killpg(pid, signal.SIGTERM)
        except OSError:
            pass


def _compile_folder(folder: Path) -> int:
    """Compile the folder's modules that have no bytecode yet (not its subfolders); how many."""
    import importlib.util
    import py_compile

    compiled = 0
    for source in sorted(folder.glob("*.py")):
        target = importlib.util.cache_from_source(str(source))
        if os.path.exists(target):
            continue
        try:
            py_compile.compile(str(source), cfile=target, doraise=True)
            compiled += 1
        except (py_compile.PyCompileError, OSError, ValueError):
            pass  # the import compiles it, or reports its error, as without this
    return compiled


def _main(prefix: str) -> None:
    """The detached process: compile ``folders()`` on all cores but one, in order."""
    import concurrent.futures
    import fcntl

    # one at a time (a sweep's workers start together): the lock is held until this process ends
    lock = open(Path(prefix) / LOCK, "a")  # noqa: SIM115
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return
    os.ftruncate(lock.fileno(), 0)  # who compiles: any run's stop_precompile ends it
    lock.write(str(os.getpid()))
    lock.flush()
    sys.pycache_prefix = prefix
    sys.dont_write_bytecode = False
    listed = folders()
    workers = max(1, (os.cpu_count() or 2) - 1)
    with concurrent.futures.ProcessPoolExecutor(workers) as pool:
        list(pool.map(_compile_folder, listed))
    (Path(prefix) / DONE_MARKER).touch()


if __name__ == "__main__":
    _main(sys.argv[1])
