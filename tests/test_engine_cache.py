"""Engine cache keys, sidecars and atomic writes. No fakes beyond the module writer: the cache
only moves files, so a writer that writes a few bytes stands in for torch_tensorrt.save."""

import json
from pathlib import Path

import pytest
import torch

from profiler.collect import engine_cache

from .conftest import default_signals

FACTS = {
    "model": "resnet50",
    "weights_sha256": "ab" * 32,
    "inputs": [[[8, 3, 224, 224], "float16"]],
    "memory_format": "contiguous",
    "backend": "ttrt_fp16",
    "precision": "fp16",
    "tf32": False,
    "compile_options": {"ir": "dynamo", "use_explicit_typing": True, "min_block_size": 5},
    "gpu": "NVIDIA H200",
    "compute_capability": "9.0",
    "versions": {"torch": "2.11.0", "torch_tensorrt": "2.11.0", "tensorrt_rtx": "1.4.0"},
    "flavour": "tensorrt-rtx",
}
CHANGED = {
    "model": "resnet18",
    "weights_sha256": "cd" * 32,
    "inputs": [[[32, 3, 224, 224], "float16"]],
    "memory_format": "channels_last",
    "backend": "ttrt_fp32",
    "precision": "fp32",
    "tf32": True,
    "compile_options": {"ir": "dynamo", "use_explicit_typing": True, "min_block_size": 1},
    "gpu": "NVIDIA H100 80GB HBM3",
    "compute_capability": "8.9",
    "versions": {"torch": "2.11.0", "torch_tensorrt": "2.11.0", "tensorrt_rtx": "1.4.1"},
    "flavour": "tensorrt",
}


def write_bytes(path):
    path.write_bytes(b"compiled module")


def test_same_facts_same_key_in_any_order():
    reordered = dict(reversed(list(FACTS.items())))
    assert (
        engine_cache.cache_key(FACTS)
        == engine_cache.cache_key(dict(FACTS))
        == engine_cache.cache_key(reordered)
    )


@pytest.mark.parametrize("fact", sorted(FACTS))
def test_changing_any_fact_changes_the_key(fact):
    assert set(CHANGED) == set(FACTS)
    changed = {**FACTS, fact: CHANGED[fact]}
    assert engine_cache.cache_key(changed) != engine_cache.cache_key(FACTS)
    # the build key ignores only the environment
    same_build = engine_cache.build_key(changed) == engine_cache.build_key(FACTS)
    assert same_build == (fact in engine_cache.ENVIRONMENT_FACTS)


def test_weights_digest_tells_seeds_and_dtypes_apart():
    def model(seed):
        torch.manual_seed(seed)
        return torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3))

    digest = engine_cache.state_dict_digest
    assert digest(model(0)) == digest(model(0))
    assert digest(model(0)) != digest(model(1))
    assert digest(model(0)) != digest(model(0).half())
    assert engine_cache.state_dict_digest(model(0).bfloat16())  # any dtype hashes


def test_store_then_hit(tmp_path):
    assert engine_cache.lookup(tmp_path, FACTS).reason == "no entry"
    path = engine_cache.store(tmp_path, FACTS, write_bytes, report={"compile_s": 12.5})
    found = engine_cache.lookup(tmp_path, FACTS)
    assert found.hit and found.module_path == path and path.read_bytes() == b"compiled module"
    sidecar = json.loads(path.with_suffix(".json").read_text())
    assert sidecar["facts"] == FACTS and sidecar["key"] == found.key
    assert engine_cache.read_report(tmp_path, found.key) == {"compile_s": 12.5}
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"{found.key}.ep", f"{found.key}.json"]


def test_sidecar_that_disagrees_is_not_used(tmp_path):
    """The key matches but the sidecar says another GPU built it (copied in by hand)."""
    path = engine_cache.store(tmp_path, FACTS, write_bytes)
    sidecar_path = path.with_suffix(".json")
    sidecar = json.loads(sidecar_path.read_text())
    sidecar["facts"]["gpu"] = "NVIDIA GeForce RTX 4090"
    sidecar_path.write_text(json.dumps(sidecar))
    found = engine_cache.lookup(tmp_path, FACTS)
    assert not found.hit
    assert "does not match its sidecar" in found.reason and "RTX 4090" in found.reason


@pytest.mark.parametrize("fact", engine_cache.ENVIRONMENT_FACTS)
def test_entry_from_another_gpu_or_version_is_reported_not_used(tmp_path, fact):
    engine_cache.store(tmp_path, {**FACTS, fact: CHANGED[fact]}, write_bytes)
    found = engine_cache.lookup(tmp_path, FACTS)
    assert not found.hit
    assert "made elsewhere" in found.reason and fact in found.reason and "rebuilt" in found.reason


def test_sidecar_without_its_module_is_a_miss(tmp_path):
    path = engine_cache.store(tmp_path, FACTS, write_bytes)
    path.unlink()
    assert not engine_cache.lookup(tmp_path, FACTS).hit


def test_failed_write_leaves_nothing(tmp_path):
    def broken(path):
        path.write_bytes(b"half")
        raise RuntimeError("serialization failed")

    with pytest.raises(RuntimeError):
        engine_cache.store(tmp_path, FACTS, broken)
    assert list(tmp_path.iterdir()) == []


def test_default_dir_and_environment_variable(monkeypatch, tmp_path):
    monkeypatch.delenv(engine_cache.ENV_VAR, raising=False)
    assert engine_cache.default_dir().parts[-3:] == (".cache", "infer-profiler", "engines")
    monkeypatch.setenv(engine_cache.ENV_VAR, str(tmp_path / "engines"))
    assert engine_cache.default_dir() == tmp_path / "engines"


@pytest.mark.parametrize(
    "damage",
    [lambda p: p.write_bytes(b"compiled modu"), lambda p: p.write_bytes(b"compiled mod\x00le")],
    ids=["truncated", "flipped"],
)
def test_a_damaged_entry_is_not_used_and_says_so_in_one_line(tmp_path, damage):
    """Issue 24 point 4: a cache entry damaged after it was stored is rebuilt, with a reason."""
    path = engine_cache.store(tmp_path, FACTS, write_bytes)
    damage(path)
    found = engine_cache.lookup(tmp_path, FACTS)
    assert not found.hit and "is damaged" in found.reason and "rebuilt" in found.reason
    assert "\n" not in found.reason
    engine_cache.store(tmp_path, FACTS, write_bytes)  # the rebuild
    assert engine_cache.lookup(tmp_path, FACTS).hit


def test_an_entry_half_written_by_a_killed_build_is_never_read(tmp_path):
    """A build killed (SIGKILL) while it writes its engine leaves no entry a lookup would use."""
    import signal
    import subprocess
    import sys

    script = (
        "import sys, time\n"
        "from pathlib import Path\n"
        "from profiler.collect import engine_cache\n"
        "def slow(p):\n"
        "    p.write_bytes(b'half an engine')\n"
        "    print('writing', flush=True)\n"
        "    time.sleep(60)\n"
        f"engine_cache.store(Path(sys.argv[1]), {FACTS!r}, slow)\n"
    )
    build = subprocess.Popen(
        [sys.executable, "-c", script, str(tmp_path)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).parent.parent,
        preexec_fn=default_signals,
    )
    try:
        assert build.stdout.readline().strip() == "writing"
        build.send_signal(signal.SIGKILL)
        build.wait(timeout=30)
    finally:
        if build.poll() is None:
            build.kill()
    found = engine_cache.lookup(tmp_path, FACTS)
    assert not found.hit and found.reason == "no entry"
    assert not (tmp_path / f"{found.key}.ep").exists()
