"""Cheaper runs without changing what is measured: models built on the run's device, the FP32
reference made from the measured model's own weights and kept in the reference cache, FLOP counts
kept in a cache, one weights digest per state, backends' libraries imported only when used."""

import json
import os
import subprocess
import sys
from functools import partial
from pathlib import Path

import pytest
import torch

from profiler.collect import engine_cache, flops, models, reference
from profiler.runs.config import RunConfig

from .conftest import ROOT

RESNET = dict(model="resnet18", image_size=32, batch_size=2)
FAST = ["--iters", "2", "--timed-warmup", "0", "--wait", "0", "--warmup", "1", "--active", "1"]
RUN = ["run", "--model", "resnet18", "--image-size", "32", "--bs", "2", *FAST, "--json"]


def config(**overrides) -> RunConfig:
    return RunConfig(backend="pytorch_bf16", **{**RESNET, **overrides})


# ---- models built on the device -----------------------------------------------------------


def test_builtin_models_are_made_on_the_device_asked_for():
    model, inputs = models.build(RunConfig(model="resnet18", image_size=32, batch_size=2), "meta")
    assert {p.device.type for p in model.parameters()} == {"meta"}
    assert all(t.device.type == "cpu" and t.abs().sum() > 0 for t in inputs)  # random, non-zero


def test_the_same_seed_on_the_same_device_gives_the_same_weights():
    first, first_inputs = models.build(config(), "cpu")
    again, again_inputs = models.build(config(), "cpu")
    other, _ = models.build(config(seed=1), "cpu")
    assert engine_cache.state_dict_digest(first) == engine_cache.state_dict_digest(again)
    assert engine_cache.state_dict_digest(first) != engine_cache.state_dict_digest(other)
    assert all(torch.equal(a, b) for a, b in zip(first_inputs, again_inputs))


def test_reference_holds_the_measured_models_weights_not_a_rebuild_from_the_seed():
    """The measured model differs from what the seed builds (as a GPU-built one differs from a
    host-built one): the reference still computes with the measured model's weights, even after
    the backend cast the model in place."""
    measured, inputs = models.build(config(seed=7))
    expected = measured(*inputs)
    ready = reference.prepare(config(use_cache=False), measured)
    measured.to(torch.bfloat16)  # what a backend does after the snapshot
    output, source = ready.output(inputs, "cpu", use_cuda=False)
    assert source == reference.COMPUTED
    assert torch.equal(output, expected)


# ---- the reference cache ------------------------------------------------------------------


def test_second_run_of_another_backend_loads_the_reference_with_identical_numerics(
    cli, monkeypatch
):
    """pytorch_bf16 computes and stores the reference; another BF16 backend (registered here:
    eager BF16 under another name) loads it, and its figures equal those against a reference
    computed afresh (--no-cache)."""
    from profiler.collect.backends import REGISTRY, Backend
    from profiler.collect.backends.eager import prepare

    monkeypatch.setitem(
        REGISTRY,
        "other_bf16",
        Backend(
            name="other_bf16",
            family="pytorch",
            precision="bf16",
            description="test",
            needs_cuda=False,
            prepare=partial(prepare, precision="bf16"),
        ),
    )
    first = cli(*RUN, "--backend", "pytorch_bf16")
    assert first.code == 0, first.stderr
    computed = json.loads(first.stdout)["numerics"]
    assert computed["reference"]["source"] == "computed"
    assert computed["reference"]["cache"] == "stored"

    loaded_run = cli(*[a for a in RUN if a != "--json"], "--backend", "other_bf16")
    assert loaded_run.code == 0, loaded_run.stderr
    (result_file,) = Path("runs").glob("other_bf16_bs2*/result.json")
    loaded = json.loads(result_file.read_text())["numerics"]
    assert loaded["reference"]["source"] == "loaded"
    assert loaded["reference"]["cache"] == "hit"
    assert loaded["reference"]["cache_key"] == computed["reference"]["cache_key"]
    assert "(reference loaded)" in " ".join(loaded_run.stderr.split())  # the progress line

    fresh_run = cli(*RUN, "--backend", "other_bf16", "--no-cache", "--replace")
    assert fresh_run.code == 0, fresh_run.stderr
    fresh = json.loads(fresh_run.stdout)["numerics"]
    assert fresh["reference"]["source"] == "computed"
    assert fresh["reference"]["cache"] == "--no-cache"
    figures = (
        "max_abs_error",
        "mean_abs_error",
        "rel_l2_error",
        "cosine_similarity",
        "top1_agreement",
    )
    assert {k: loaded[k] for k in figures} == {k: fresh[k] for k in figures}


def test_loaded_reference_is_bit_identical_to_a_computed_one(private_cache):
    model, inputs = models.build(config())
    ready = reference.prepare(config(), model)
    computed, source = ready.output(inputs, "cpu", use_cuda=False)
    assert source == reference.COMPUTED and ready.cache_note == "stored"
    model, inputs = models.build(config())
    again = reference.prepare(config(), model)
    loaded, source = again.output(inputs, "cpu", use_cuda=False)
    assert source == reference.LOADED and again.cache_note == "hit"
    assert again.cache_key == ready.cache_key and torch.equal(loaded, computed)


def test_fp16_rounded_inputs_have_their_own_entry(private_cache):
    """The reference gets the backend's inputs cast back to float32: BF16-rounded values are
    other inputs than the FP32 ones, so they never share an entry."""
    model, inputs = models.build(config())
    exact = reference.prepare(config(), model)
    exact.output(inputs, "cpu", use_cuda=False)
    rounded = reference.prepare(config(), model)
    _, source = rounded.output(tuple(t.bfloat16() for t in inputs), "cpu", use_cuda=False)
    assert source == reference.COMPUTED and rounded.cache_key != exact.cache_key


def _key(cfg: RunConfig) -> str:
    model, inputs = models.build(cfg)
    ready = reference.prepare(cfg, model)
    ready.output(inputs, "cpu", use_cuda=False)
    return ready.cache_key


def test_reference_key_changes_with_seed_batch_weights_and_tf32(tmp_path):
    model, _ = models.build(config())
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.mul_(0.5)
    weights = tmp_path / "weights.pt"
    torch.save(model.state_dict(), weights)
    keys = [
        _key(config()),
        _key(config(seed=1)),
        _key(config(batch_size=3)),
        _key(config(weights=weights)),
        _key(config(tf32=True)),
        _key(config(image_size=40)),
    ]
    assert len(set(keys)) == len(keys)
    assert _key(config()) == keys[0]


@pytest.mark.parametrize("damage", ["truncated", "garbage", "not a tensor", "sidecar"])
def test_a_damaged_reference_entry_is_computed_again_and_replaced(private_cache, damage):
    model, inputs = models.build(config())
    ready = reference.prepare(config(), model)
    expected, _ = ready.output(inputs, "cpu", use_cuda=False)
    entry, sidecar = engine_cache.paths(ready.cache_dir, ready.cache_key, reference.CACHE_SUFFIX)
    if damage == "truncated":
        entry.write_bytes(entry.read_bytes()[:100])
    elif damage == "garbage":
        entry.write_bytes(b"\x00not a torch file")
    elif damage == "not a tensor":
        torch.save({"output": expected}, entry)
    else:
        sidecar.write_text("{")
    model, inputs = models.build(config())
    again = reference.prepare(config(), model)
    output, source = again.output(inputs, "cpu", use_cuda=False)
    assert source == reference.COMPUTED and torch.equal(output, expected)
    assert again.cache_note == "stored"
    model, inputs = models.build(config())
    third = reference.prepare(config(), model)
    output, source = third.output(inputs, "cpu", use_cuda=False)
    assert source == reference.LOADED and torch.equal(output, expected)


def test_custom_models_and_no_cache_are_not_cached(private_cache):
    custom = config(model="tests.tiny_models:conv_net", image_size=16)
    model, inputs = models.build(custom)
    ready = reference.prepare(custom, model)
    ready.output(inputs, "cpu", use_cuda=False)
    assert ready.cache_key is None and "package.module:function" in ready.cache_note
    model, inputs = models.build(config())
    off = reference.prepare(config(use_cache=False), model)
    off.output(inputs, "cpu", use_cuda=False)
    assert off.cache_note == "--no-cache"
    assert not (private_cache / reference.CACHE_KIND).exists()


# ---- FLOP counts --------------------------------------------------------------------------


def test_flop_count_neither_copies_nor_moves_the_model():
    """Counted on a copy on the meta device (issue 47: never the model's own first call): the
    model's weights stay where they were, as they were; CPU copies only for an operator without
    a meta kernel, the same figures."""
    layer = torch.nn.Linear(8, 4)
    before = layer.weight.detach().clone()
    counted = flops.count(layer, (torch.randn(3, 8),))
    assert counted["flops_per_batch"] == 2 * 3 * 8 * 4
    assert counted["output_shapes"] == [[3, 4]] and "(meta device)" in counted["how"]
    on_cpu = flops._counted(layer, (torch.randn(3, 8),), "cpu")
    assert on_cpu[0] == counted["flops_per_batch"]
    assert layer.weight.device.type == "cpu" and torch.equal(layer.weight, before)


def test_a_profiled_window_imports_neither_dynamo_nor_inductor():
    """torch.profiler's cycle start used to import torch._dynamo and torch._inductor (about
    3.5 s of a tiny run's 5.4 s on this machine); both are left unimported, and what was changed
    for them is put back. The FLOP count imports torch._dynamo, torch's own (FlopCounterMode
    does: issue 47 removed the stand-in it met before)."""
    code = """
import sys, torch
from profiler.collect import flops
from profiler.collect.device import inductor_left_unimported
from tests.tiny_models import conv_net
model, inputs = conv_net()
with inductor_left_unimported(), torch.profiler.profile(
        activities=[torch.profiler.ProfilerActivity.CPU],
        schedule=torch.profiler.schedule(wait=0, warmup=1, active=1)) as prof:
    for _ in range(3):
        model(*inputs)
        prof.step()
assert "torch._dynamo" not in sys.modules and "torch._inductor" not in sys.modules
assert "_inductor" in torch._lazy_modules
assert flops.count(model, inputs)["flops_per_batch"] > 0
assert sys.modules["torch._dynamo"].__file__ is not None
"""
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "CUDA_VISIBLE_DEVICES": ""},
    )
    assert done.returncode == 0, done.stderr


def test_flop_count_is_cached_and_a_damaged_entry_is_counted_again(tmp_path, monkeypatch):
    model, inputs = models.build(config())
    facts = models.build_facts(config(), inputs)
    first = flops.cached_count(model, inputs, facts, tmp_path)
    calls = []
    monkeypatch.setattr(flops, "count", lambda *a: calls.append(a) or {"error": "counted"})
    assert flops.cached_count(model, inputs, facts, tmp_path) == first and calls == []
    for entry in tmp_path.glob("*" + flops.CACHE_SUFFIX):
        entry.write_text("{cut")
    assert flops.cached_count(model, inputs, facts, tmp_path) == {"error": "counted"}
    assert len(calls) == 1


# ---- one digest per state -----------------------------------------------------------------


def test_weights_digest_is_hashed_once_per_state(monkeypatch):
    model = torch.nn.Linear(4, 4)
    hashed = []
    real = engine_cache.state_digest
    monkeypatch.setattr(engine_cache, "state_digest", lambda s: hashed.append(1) or real(s))
    first = engine_cache.state_dict_digest(model)
    assert engine_cache.state_dict_digest(model) == first and len(hashed) == 1
    with torch.no_grad():
        model.weight.add_(1.0)  # changed in place
    changed = engine_cache.state_dict_digest(model)
    assert changed != first and len(hashed) == 2
    assert engine_cache.state_dict_digest(model.half()) != changed and len(hashed) == 3


# ---- lazy imports -------------------------------------------------------------------------

HEAVY = ("torch_tensorrt", "tensorrt", "onnxruntime", "onnx", "transformers", "torchao", "modelopt")


def test_an_eager_run_imports_no_other_backends_library():
    code = (
        "import sys\n"
        "from profiler.collect import backends, harness, models, reference\n"
        "from profiler.runs.config import RunConfig\n"
        "backends.all_backends()\n"
        "models.build(RunConfig(model='resnet18', image_size=32, batch_size=1))\n"
        f"loaded = sorted(m for m in {HEAVY!r} if m in sys.modules)\n"
        "assert not loaded, loaded\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr


def test_help_imports_no_torch_nor_pandas():
    """Help and usage errors start fast: no torch, and not the analysis half's pandas either."""
    code = (
        "import sys\n"
        "sys.argv = ['profile.py', 'run', '--help']\n"
        "import runpy\n"
        "try:\n"
        "    runpy.run_path('profile.py', run_name='__main__')\n"
        "except SystemExit:\n"
        "    pass\n"
        "loaded = [m for m in ('torch', 'pandas') if m in sys.modules]\n"
        "assert not loaded, loaded\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr


# ---- git and nvidia-smi asked in the background --------------------------------------------


def test_environment_reads_the_answers_asked_for_in_the_background(monkeypatch):
    from profiler.collect import metadata

    asked = []
    monkeypatch.setattr(metadata, "_ANSWERS", {})
    monkeypatch.setattr(
        metadata, "git_commit", lambda: asked.append("git") or {"commit": "abc", "dirty": False}
    )
    monkeypatch.setattr(metadata, "driver_version", lambda: asked.append("driver") or "1.0")
    metadata.prefetch()
    metadata.prefetch()  # asked once
    metadata.settle()
    assert sorted(asked) == ["driver", "git"]
    assert metadata.environment(torch)["git"] == {"commit": "abc", "dirty": False}
    assert sorted(asked) == ["driver", "git"]  # read, not asked again


def test_an_unwritable_reference_cache_is_noted_and_the_run_goes_on(tmp_path):
    blocker = tmp_path / "a file"
    blocker.write_text("")
    cfg = config(cache_dir=blocker)  # <cache>/references cannot be made under a file
    model, inputs = models.build(cfg)
    ready = reference.prepare(cfg, model)
    output, source = ready.output(inputs, "cpu", use_cuda=False)
    assert source == reference.COMPUTED and output.shape == (2, 1000)
    assert ready.cache_note.startswith("not stored (")
