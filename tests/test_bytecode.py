"""The entry point keeps bytecode under the cache folder when PYTHONDONTWRITEBYTECODE is set
(compiling torch's modules in every process was half of an eager run's seconds on the GPU
machine), never beside the sources, and not when asked not to."""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT, default_signals, link_kept_bytecode


def _version(tmp_path, **env) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k not in ("PYTHONPYCACHEPREFIX",)}
    environ.update(
        {"INFER_PROFILER_CACHE": str(tmp_path / "cache"), "PYTHONDONTWRITEBYTECODE": "1", **env}
    )
    return subprocess.run(
        [sys.executable, str(ROOT / "profile.py"), "--version"],
        env=environ,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=True,
    )


def test_bytecode_is_kept_under_the_cache_folder(tmp_path):
    _version(tmp_path)
    kept = list((tmp_path / "cache" / "pycache").rglob("*.pyc"))
    assert any(path.name.startswith("app.") and path.parent.name == "cli" for path in kept)  # ours
    assert any("typer" in str(path) for path in kept)  # and the libraries it imports


@pytest.mark.parametrize(
    "env", [{"INFER_PROFILER_PYCACHE": "off"}, {"PYTHONDONTWRITEBYTECODE": ""}]
)
def test_nothing_changes_when_asked_or_when_bytecode_is_written_anyway(tmp_path, env):
    _version(tmp_path, **env)
    assert not (tmp_path / "cache" / "pycache").exists()


def test_keep_bytecode_leaves_a_prefix_the_user_set(monkeypatch, tmp_path):
    from profiler.collect import bytecode

    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    monkeypatch.setattr(sys, "pycache_prefix", str(tmp_path / "mine"))
    assert bytecode.keep_bytecode({}) is None and sys.pycache_prefix == str(tmp_path / "mine")
    monkeypatch.setattr(sys, "pycache_prefix", None)
    monkeypatch.setenv("INFER_PROFILER_CACHE", str(tmp_path / "cache"))
    assert bytecode.keep_bytecode({}) == tmp_path / "cache" / "pycache"
    assert sys.pycache_prefix == str(tmp_path / "cache" / "pycache")
    assert sys.dont_write_bytecode is False


def test_a_sweep_worker_keeps_the_bytecode_of_what_its_cells_import(tmp_path):
    # the sweep's own process never imports torch: torch's bytecode comes from the worker
    kept = tmp_path / "cache" / "pycache"
    link_kept_bytecode(kept)
    environ = {
        k: v for k, v in os.environ.items() if k not in ("PYTHONPYCACHEPREFIX", "PYTHONPATH")
    }
    environ.update(
        {
            "INFER_PROFILER_CACHE": str(tmp_path / "cache"),
            "PYTHONDONTWRITEBYTECODE": "1",
            "CUDA_VISIBLE_DEVICES": "",
        }
    )
    subprocess.run(
        [
            sys.executable,
            str(ROOT / "profile.py"),
            "sweep",
            "--backends",
            "pytorch_fp32",
            "--bs",
            "1",
            "--model",
            "tests.tiny_models:conv_net",
            "--iters",
            "2",
            "--timed-warmup",
            "0",
            "--active",
            "1",
            "--name",
            "s",
        ],
        env=environ,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=True,
    )
    assert any(kept.rglob("torch/nn/modules/*.pyc"))


# ---- the background compilation of a fresh machine's first run ------------------------------


def test_folders_resolve_the_listing_here_in_order_and_skip_what_is_missing(tmp_path, monkeypatch):
    from profiler.collect import bytecode

    (tmp_path / "lib" / "b").mkdir(parents=True)
    (tmp_path / "lib" / "a").mkdir()
    monkeypatch.setattr(
        bytecode,
        "roots",
        lambda: {
            "site": tmp_path / "lib",
            "platsite": tmp_path / "lib",
            "stdlib": tmp_path / "std",
            "project": tmp_path,
        },
    )
    listed = ("site:b", "site:gone", "stdlib:x", "site:a", "site:b")
    assert bytecode.folders(listed) == [tmp_path / "lib" / "b", tmp_path / "lib" / "a"]


def test_the_committed_listing_still_names_this_machines_folders():
    from profiler.collect import bytecode
    from profiler.collect.import_dirs import DIRS

    found = bytecode.folders()
    assert len(found) >= 0.8 * len(DIRS)  # (another torch may lack a few)
    assert any(path.name == "torch" for path in found[:60])  # torch early: the run needs it first


def test_precompile_fills_the_prefix_once_and_one_at_a_time(tmp_path, monkeypatch):
    import fcntl
    import importlib.util

    from profiler.collect import bytecode

    source = tmp_path / "src"
    source.mkdir()
    (source / "m1.py").write_text("X = 1\n")
    (source / "m2.py").write_text("Y = 2\n")
    prefix = tmp_path / "cache" / "pycache"
    prefix.mkdir(parents=True)
    monkeypatch.setattr(bytecode, "folders", lambda: [source])
    monkeypatch.setattr(sys, "pycache_prefix", str(prefix))
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    with open(prefix / ".precompiling", "a") as held:  # another process compiles: nothing here
        fcntl.flock(held, fcntl.LOCK_EX)
        bytecode._main(str(prefix))
        assert not (prefix / bytecode.DONE_MARKER).exists()
    bytecode._main(str(prefix))
    for name in ("m1.py", "m2.py"):
        assert os.path.exists(importlib.util.cache_from_source(str(source / name)))
    assert str(prefix) in importlib.util.cache_from_source(str(source / "m1.py"))
    assert (prefix / bytecode.DONE_MARKER).exists()
    assert bytecode.precompile({}) is False  # done: not again


@pytest.mark.parametrize(
    "prefix, environ",
    [(None, {}), ("/x/mine", {}), ("/x/pycache", {"INFER_PROFILER_PYCACHE": "off"})],
)
def test_precompile_only_where_bytecode_goes_to_the_cache_folder(monkeypatch, prefix, environ):
    from profiler.collect import bytecode

    monkeypatch.setattr(sys, "pycache_prefix", prefix)
    assert bytecode.precompile(environ) is False


def test_stop_precompile_ends_the_background_process(tmp_path, monkeypatch):
    from profiler.collect import bytecode

    prefix = tmp_path / "pycache"
    prefix.mkdir()
    monkeypatch.setattr(sys, "pycache_prefix", str(prefix))
    started = []
    real_popen = subprocess.Popen

    def slow(args, **kwargs):  # a stand-in compiler that would run for a minute
        process = real_popen([sys.executable, "-c", "import time; time.sleep(60)"], **kwargs)
        started.append(process)
        return process

    monkeypatch.setattr(bytecode.subprocess, "Popen", slow)
    assert bytecode.precompile({}) is True
    assert bytecode.precompile({}) is False  # one per process
    bytecode.stop_precompile()
    assert started[0].poll() is not None
    bytecode.stop_precompile()  # nothing left: no error


def test_any_run_stops_a_compilation_another_process_started(tmp_path, monkeypatch):
    from profiler.collect import bytecode

    prefix = tmp_path / "pycache"
    prefix.mkdir()
    monkeypatch.setattr(sys, "pycache_prefix", str(prefix))
    # a stand-in compilation: its command line names the module and the prefix, as
    # `python -m MODULE PREFIX PARENT` would
    other = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)", bytecode.MODULE, str(prefix)],
        start_new_session=True,
        preexec_fn=default_signals,
    )
    try:
        (prefix / bytecode.LOCK).write_text(str(other.pid))
        cmdline = Path(f"/proc/{other.pid}/cmdline")
        for _ in range(200):  # until it has exec'd (before, it shows this process's command)
            if bytecode.MODULE.encode() in cmdline.read_bytes():
                break
            time.sleep(0.05)
        bytecode.stop_precompile()  # this process started none
        assert other.wait(timeout=10) is not None
    finally:
        other.kill()
    (prefix / bytecode.LOCK).write_text(str(os.getpid()))  # never this process itself
    bytecode.stop_precompile()
