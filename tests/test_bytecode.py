"""The entry point keeps bytecode under the cache folder when PYTHONDONTWRITEBYTECODE is set
(compiling torch's modules in every process was half of an eager run's seconds on the GPU
machine), never beside the sources, and not when asked not to."""

import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT


def _version(tmp_path, **env) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k not in ("PYTHONPYCACHEPREFIX",)}
    environ.update({"INFER_PROFILER_CACHE": str(tmp_path / "cache"),
                    "PYTHONDONTWRITEBYTECODE": "1", **env})
    return subprocess.run([sys.executable, str(ROOT / "profile.py"), "--version"], env=environ,
                          capture_output=True, text=True, cwd=tmp_path, check=True)


def test_bytecode_is_kept_under_the_cache_folder(tmp_path):
    _version(tmp_path)
    kept = list((tmp_path / "cache" / "pycache").rglob("*.pyc"))
    assert any(path.name.startswith("app.") and path.parent.name == "cli" for path in kept)  # ours
    assert any("typer" in str(path) for path in kept)  # and the libraries it imports


@pytest.mark.parametrize("env", [{"INFER_PROFILER_PYCACHE": "off"},
                                 {"PYTHONDONTWRITEBYTECODE": ""}])
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
    environ = {k: v for k, v in os.environ.items() if k not in ("PYTHONPYCACHEPREFIX",
                                                                "PYTHONPATH")}
    environ.update({"INFER_PROFILER_CACHE": str(tmp_path / "cache"),
                    "PYTHONDONTWRITEBYTECODE": "1", "CUDA_VISIBLE_DEVICES": ""})
    subprocess.run([sys.executable, str(ROOT / "profile.py"), "sweep", "--backends",
                    "pytorch_fp32", "--bs", "1", "--model", "tests.tiny_models:conv_net",
                    "--iters", "2", "--timed-warmup", "0", "--active", "1", "--name", "s"],
                   env=environ, capture_output=True, text=True, cwd=tmp_path, check=True)
    kept = tmp_path / "cache" / "pycache"
    assert any(kept.rglob("torch/nn/modules/*.pyc"))
