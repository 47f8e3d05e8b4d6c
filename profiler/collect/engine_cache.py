"""A folder of compiled modules, keyed by everything that decides what was compiled and where.

An entry is two files: ``<key>.ep`` (the compiled module, saved by the backend) and ``<key>.json``
(the sidecar: the facts the key was made from, and what the build reported). The key hashes all
facts; the *build key* hashes only the facts about the build itself (model, weights, shapes,
backend, precision, options), leaving out the environment (GPU, compute capability, library
versions). That second hash lets a miss say why: "an entry for this build exists, but it was made
on another GPU / with other versions". On a hit the sidecar is read back and compared in full, so
an entry copied in by hand or a hash collision is never used for another build.

File handling only (torch is imported just for the weights digest); tested on CPU.
"""

from __future__ import annotations

import hashlib
import json
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from profiler.fsutil import write_json_atomic, write_with
from profiler.runs.layout import (  # noqa: F401 (ENV_VAR and peaks_dir: re-exported)
    CACHE_ENV_VAR as ENV_VAR,
    cache_dir as default_dir,
    peaks_dir,
)

SIDECAR_SCHEMA = 1
# facts that describe the machine and software rather than the build; a mismatch in one of these
# means "built elsewhere", which is reported, not silently rebuilt
ENVIRONMENT_FACTS = ("gpu", "compute_capability", "versions", "flavour")


def entries_dir(cache_dir: Path | None, kind: str) -> Path:
    """Where entries of another kind than engines live: ``<engine cache>/<kind>/`` (the FP32
    reference outputs, FLOP counts), so ``--cache-dir`` and ``--no-cache`` govern them too."""
    return (Path(cache_dir) if cache_dir else default_dir()) / kind


def _digest(data: object) -> str:
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def cache_key(facts: object) -> str:
    """A stable name for these facts (JSON data): same facts, same key; any fact changed,
    another key."""
    return _digest(facts)[:32]


def build_key(facts: dict) -> str:
    """The key of the build alone, without the environment facts."""
    return _digest({k: v for k, v in facts.items() if k not in ENVIRONMENT_FACTS})[:32]


# model -> (the state's identity when hashed, its digest): one hash per state, however many
# callers ask (the FP32 reference's cache key and an engine's)
_DIGESTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def state_dict_digest(model, state: dict | None = None) -> str:
    """SHA-256 over (name, dtype, shape, bytes) of every state-dict tensor, in name order: two
    models share a digest only when their weights and buffers are bit-identical. ``state``: the
    model's state dict already copied to the host (hashed instead of copying again).

    Remembered per model while its tensors stay the same ones, unchanged (same storage, dtype,
    shape and version counter): a cast or an in-place change is hashed afresh."""
    identity = _state_identity(model)
    remembered = _DIGESTS.get(model)
    if identity is not None and remembered is not None and remembered[0] == identity:
        return remembered[1]
    digest = state_digest(model.state_dict() if state is None else state)
    if identity is not None:
        _DIGESTS[model] = (identity, digest)
    return digest


def state_digest(state: dict) -> str:
    """The digest of a state dict (name -> tensor) as ``state_dict_digest`` makes it."""
    import torch

    digest = hashlib.sha256()
    for name, tensor in sorted(state.items()):
        flat = tensor.detach().cpu().contiguous().reshape(-1)
        digest.update(f"{name}|{flat.dtype}|{tuple(tensor.shape)}|".encode())
        digest.update(flat.view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def _state_identity(model) -> tuple | None:
    """What changes when a state tensor is replaced, cast or changed in place; None when a
    tensor keeps no version counter (made under inference mode) or has no storage of its own (a
    tensor subclass): then nothing is remembered."""
    state = model.state_dict()
    try:
        if any(t.is_inference() for t in state.values()):
            return None
        return tuple(
            (name, t.device.type, t.data_ptr(), t.dtype, tuple(t.shape), t._version)
            for name, t in state.items()
        )
    except (RuntimeError, TypeError, NotImplementedError):  # a tensor subclass without storage
        return None


@dataclass
class Lookup:
    """The outcome of looking for an entry: a module path to load, or why there is none."""

    key: str
    module_path: Path
    hit: bool
    reason: str  # "hit", "no entry", or why an entry was not used


def paths(cache_dir: Path, key: str, suffix: str = ".ep") -> tuple[Path, Path]:
    """The entry's file (``suffix``: what it holds) and its sidecar."""
    return cache_dir / f"{key}{suffix}", cache_dir / f"{key}.json"


def _read_sidecar(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("facts"), dict) else None


def _differences(wanted: dict, found: dict) -> list[str]:
    names = sorted(set(wanted) | set(found))
    return [
        f"{name} {found.get(name)!r} there, {wanted.get(name)!r} here"
        for name in names
        if wanted.get(name) != found.get(name)
    ]


def lookup(cache_dir: Path, facts: dict, suffix: str = ".ep") -> Lookup:
    key = cache_key(facts)
    module_path, sidecar_path = paths(cache_dir, key, suffix)
    sidecar = _read_sidecar(sidecar_path) if sidecar_path.exists() else None
    if sidecar is not None and module_path.is_file():
        if sidecar["facts"] == facts:
            if sidecar.get("module_sha256", _file_digest(module_path)) != _file_digest(module_path):
                return Lookup(
                    key,
                    module_path,
                    False,
                    f"entry {key} is damaged (its file no "
                    "longer matches the digest recorded when it was built): not "
                    "used, rebuilt",
                )
            return Lookup(key, module_path, True, "hit")
        differences = "; ".join(_differences(facts, sidecar["facts"]))
        return Lookup(
            key,
            module_path,
            False,
            f"entry {key} does not match its sidecar ({differences}): not used, rebuilt",
        )
    # a miss: is there an entry for the same build made on another GPU or with other versions?
    wanted_build = build_key(facts)
    for other in sorted(cache_dir.glob("*.json")) if cache_dir.is_dir() else []:
        found = _read_sidecar(other)
        if found and found.get("build_key") == wanted_build and other != sidecar_path:
            env_wanted = {k: facts.get(k) for k in ENVIRONMENT_FACTS}
            env_found = {k: found["facts"].get(k) for k in ENVIRONMENT_FACTS}
            differences = "; ".join(_differences(env_wanted, env_found))
            return Lookup(
                key,
                module_path,
                False,
                f"a cached engine for this build was made "
                f"elsewhere ({differences}): not used, rebuilt",
            )
    return Lookup(key, module_path, False, "no entry")


def store(
    cache_dir: Path,
    facts: dict,
    write_module: Callable[[Path], object],
    report: dict | None = None,
    suffix: str = ".ep",
) -> Path:
    """Save an entry: ``write_module(tmp_path)`` writes the module, which is then renamed into
    place, and the sidecar follows (written last, so a sidecar always has its module)."""
    cache_dir.mkdir(parents=True, exist_ok=True)
    key = cache_key(facts)
    module_path, sidecar_path = paths(cache_dir, key, suffix)
    write_with(module_path, write_module, suffix=".tmp.pt2")
    write_json_atomic(
        sidecar_path,
        {
            "schema": SIDECAR_SCHEMA,
            "key": key,
            "build_key": build_key(facts),
            "facts": facts,
            "module_sha256": _file_digest(module_path),
            "report": report or {},
        },
    )
    return module_path


def _file_digest(path: Path) -> str | None:
    """SHA-256 of a file's bytes (None when it cannot be read): a damaged entry is told apart
    from the one that was stored."""
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
    except OSError:
        return None
    return digest.hexdigest()


def read_report(cache_dir: Path, key: str) -> dict:
    sidecar = _read_sidecar(paths(cache_dir, key)[1])
    return (sidecar or {}).get("report", {})


def add_to_report(cache_dir: Path, key: str, more: dict) -> bool:
    """Keep ``more`` in an entry's report (what was measured on its module after it was
    stored); False, and nothing written, where the entry is gone or its file no longer matches
    its recorded digest (another writer replaced it meanwhile)."""
    module_path, sidecar_path = paths(cache_dir, key)
    sidecar = _read_sidecar(sidecar_path)
    if sidecar is None or sidecar.get("module_sha256") != _file_digest(module_path):
        return False
    write_json_atomic(sidecar_path, {**sidecar, "report": {**sidecar.get("report", {}), **more}})
    return True
