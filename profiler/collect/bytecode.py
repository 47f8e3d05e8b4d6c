"""Keep compiled bytecode between runs where the environment says not to write it.

Python compiles every module it imports to bytecode and, unless told not to, keeps the result in
``__pycache__`` beside the source. Containers often set ``PYTHONDONTWRITEBYTECODE=1`` (the GPU
machine this project is measured on does): then every process compiles torch, torchvision and
their dependencies again. Measured on an H100 host: ``builtins.compile`` took 7.6 s of a 16 s
eager ResNet50 run (2,437 modules), and the run took 19.5 s cold, 5.3-7.2 s once the bytecode
was kept. So the entry point, the sweep worker and the Ray cell task keep it under the cache
folder (``<cache>/pycache``, never beside the sources, which is what the variable usually
protects), unless ``INFER_PROFILER_PYCACHE=off`` asks for the environment's behaviour. A prefix
the user set (``PYTHONPYCACHEPREFIX``) is left alone, and so is a ``pycache`` folder that is a
symlink or another user's (then bytecode is not kept: a folder this tool did not make is never
written into).

The first process on a fresh machine still compiles everything it imports, one module after
another. ``precompile`` shortens that: a child process compiles, on all cores but one, the
folders a run imports from (``import_dirs.DIRS``, in the order a run first imports from them),
into the same cache folder, while the run imports; whatever it has compiled by the time the
import reaches a module is read instead of compiled. The child never outlives the command that
started it: ``stop_precompile`` ends it (and its workers: its process group) before the measured
windows and on every way out of the command (``profiler.cli.app.main``'s ``finally``, which a
SIGTERM or SIGHUP reaches too: profiler.signals), and on Linux the kernel ends it when the
command dies in a way no code sees (SIGKILL, the OOM killer: ``PR_SET_PDEATHSIG``, set in the
child and in each of its workers; elsewhere a thread of the child watches its parent). What it
left undone, the next run's imports or precompile finish. Its lock (``.precompiling``, one
compilation at a time) is opened with ``O_NOFOLLOW`` and used only when it is a regular file of
this user with one link, so a symlink or a hard link planted there is never written through. A
folder marker says when every listed folder is done.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

OPT_OUT = "INFER_PROFILER_PYCACHE"
#: in the cache's pycache folder: every folder of import_dirs.DIRS compiled for this interpreter
DONE_MARKER = f".precompiled-{sys.implementation.cache_tag}"
#: in the same folder: held (flock) by the compiling process, which writes its pid into it
LOCK = ".precompiling"
#: what the compiling process runs (python -m MODULE PREFIX PARENT_PID)
MODULE = "profiler.collect.bytecode"
#: the most a lock file holds that is read back (a pid)
_LOCK_BYTES = 32

_precompiling: subprocess.Popen | None = None


def _opted_out(environ) -> bool:
    return environ.get(OPT_OUT, "").strip().lower() in ("0", "off", "no", "false")


def own_folder(folder: Path) -> bool:
    """``folder`` is a folder of this user's and no symlink: one this tool may have made and
    may write into."""
    try:
        info = os.lstat(folder)
    except OSError:
        return False
    return stat.S_ISDIR(info.st_mode) and info.st_uid == os.geteuid()


def keep_bytecode(environ=os.environ) -> Path | None:
    """Set ``sys.pycache_prefix`` to the cache folder's ``pycache`` when bytecode would not be
    written; returns that folder, or None when nothing changed. Call before the heavy imports."""
    if _opted_out(environ):
        return None
    if not sys.dont_write_bytecode or sys.pycache_prefix is not None:
        return None
    from profiler.collect.engine_cache import entries_dir

    folder = entries_dir(None, "pycache")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:  # an unwritable cache: compile as the environment asked
        return None
    if not own_folder(folder):  # a symlink or another user's folder: not written into
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
    """Start compiling the folders a run imports from in a child process, when bytecode goes to
    our cache folder (``keep_bytecode``) and that folder is not complete yet. True when started.
    Call after ``keep_bytecode``, before the heavy imports; ``stop_precompile`` ends it, and the
    child ends by itself when this process does (module doc)."""
    from profiler import child_env

    global _precompiling
    prefix = sys.pycache_prefix
    if (
        _precompiling is not None
        or prefix is None
        or not prefix.endswith("pycache")
        or _opted_out(environ)
        or not own_folder(Path(prefix))
        or (Path(prefix) / DONE_MARKER).exists()
    ):
        return False
    try:
        _precompiling = subprocess.Popen(
            [sys.executable, "-m", MODULE, prefix, str(os.getpid())],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            # a process group of its own, so that stop_precompile ends its workers with it; the
            # parent's death ends it (_bind_to_parent), whatever the terminal sends
            start_new_session=True,
            env=child_env(),
        )
    except OSError:
        return False
    return True


def stop_precompile(others: bool = True) -> None:
    """End the background compilation (its process group: the compiling workers too): this
    process's, and with ``others`` another's (a sweep's workers start together: one of them
    started it, and none of them times a window beside it). Safe to call any number of times:
    a command's way out calls it with ``others=False``."""
    global _precompiling
    process, _precompiling = _precompiling, None
    if process is None or process.poll() is not None:
        if others:
            _stop_another()
        return
    import signal

    try:
        os.killpg(process.pid, signal.SIGKILL)  # it writes each file whole: nothing to finish
    except OSError:
        pass
    try:
        process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass


def _read_lock(path: Path) -> int:
    """The pid written into the lock file ``path``, 0 when there is none (never through a
    symlink, never more than a pid's bytes, never from a FIFO or another user's file)."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return 0
    try:
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid():
            return 0
        text = os.read(descriptor, _LOCK_BYTES).strip()
    except OSError:
        return 0
    finally:
        os.close(descriptor)
    return int(text) if text.isdigit() else 0


def _stop_another() -> None:
    """The compilation another process started, by the pid it wrote into its lock file, when
    that pid is still a compilation into this prefix (its command line says so)."""
    import signal

    prefix = sys.pycache_prefix
    if prefix is None:
        return
    pid = _read_lock(Path(prefix) / LOCK)
    if pid <= 0 or pid == os.getpid():
        return
    try:
        arguments = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return
    if MODULE.encode() in arguments and os.fsencode(prefix) in arguments:
        try:
            os.killpg(pid, signal.SIGKILL)  # (it leads its group: its workers too)
        except OSError:
            pass


def _bind_to_parent(parent: int) -> None:
    """End this process when ``parent`` ends, however it ends: the kernel's parent-death signal
    on Linux (and an exit now if the parent is already gone), a thread that watches elsewhere."""
    import signal

    if sys.platform.startswith("linux"):
        from profiler.signals import end_with_parent

        end_with_parent(signal.SIGKILL)
        if os.getppid() != parent:  # it died before the signal was asked for
            os._exit(0)
        return
    import threading
    import time

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        try:
            os.killpg(0, signal.SIGKILL)  # this process and its workers
        finally:
            os._exit(0)

    threading.Thread(target=watch, daemon=True).start()


def _worker_bound(parent: int) -> None:
    """A compiling worker (the pool's initializer): it ends with the compiling process."""
    if sys.platform.startswith("linux"):
        _bind_to_parent(parent)


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


def take_lock(prefix: Path) -> int | None:
    """The lock of the compilation into ``prefix``, held (an open descriptor, this process's pid
    written into it); None when another process holds it, or when what is at its path is not a
    lock this tool may use: a symlink (never followed), a folder, a FIFO, another user's file or
    a file with more than one link (the file a hard link names elsewhere is never emptied)."""
    import fcntl

    if not own_folder(prefix):
        return None
    try:
        descriptor = os.open(
            prefix / LOCK,
            os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
            0o600,
        )
    except OSError:  # ELOOP: a symlink; anything else: no lock, no compilation
        return None
    try:
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid() or info.st_nlink != 1:
            raise OSError("not a lock file of this tool")
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.ftruncate(descriptor, 0)  # who compiles: any run's stop_precompile ends it
        os.write(descriptor, str(os.getpid()).encode())
    except OSError:
        os.close(descriptor)
        return None
    return descriptor


def _main(prefix: str, parent: int | None = None) -> None:
    """The child: compile ``folders()`` on all cores but one, in order, while ``parent`` (the
    command that started it) lives."""
    import concurrent.futures

    if parent is not None:
        _bind_to_parent(parent)
    # one at a time (a sweep's workers start together): the lock is held until this process ends
    if take_lock(Path(prefix)) is None:
        return
    sys.pycache_prefix = prefix
    sys.dont_write_bytecode = False
    listed = folders()
    workers = max(1, (os.cpu_count() or 2) - 1)
    with concurrent.futures.ProcessPoolExecutor(
        workers, initializer=_worker_bound, initargs=(os.getpid(),)
    ) as pool:
        list(pool.map(_compile_folder, listed))
    try:  # (never through a symlink planted at the marker's path)
        os.close(os.open(Path(prefix) / DONE_MARKER, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW))
    except OSError:
        pass  # the next run compiles what is left again: nothing, quickly


if __name__ == "__main__":
    _main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else None)
