"""Whose code a ``package.module:function`` model is: the module's file and its hash, recorded
in result.json (``model_source``) when the run imported it, and checked before a command that
did not get the model from its own command line imports it again (re-timing: ``compare
--processes``, ``advise --try``).

A run folder may come from someone else, and its result.json names the model to import. So a
re-timing says which file it will import, and does so only when that file is the one the run
recorded (the same path, the same SHA-256), or with ``--trust-model``. The file is found as the
child processes will find it (the current folder and this checkout first, then PYTHONPATH and
this interpreter's path), without importing anything: no code of the module or its packages
runs to find it. What is checked is the module's own file; the ``__init__.py`` files of its
packages run too when it is imported, and are not checked. Built-in models (resnet50 ...) are
this package's code and need no check. Torch-free."""

from __future__ import annotations

import hashlib
import os
import sys
from collections.abc import Callable
from importlib.machinery import PathFinder
from pathlib import Path

import msgspec

from profiler import SOURCE_ROOT
from profiler.errors import UserError

#: the flag that lets a re-timing import a module the run did not record (or not as it is)
TRUST = "--trust-model"


class ModelSource(msgspec.Struct, frozen=True):
    """result.json's ``model_source``: the module of a package.module:function model, as the
    run imported it."""

    module: str
    path: str  # the file, absolute, symlinks resolved
    sha256: str


def is_custom(model: str) -> bool:
    return ":" in model


def digest(path: Path) -> str:
    sha = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            sha.update(block)
    return sha.hexdigest()


def of_imported(model: str) -> ModelSource | None:
    """The source of a package.module:function model this process has imported (None for a
    built-in model, or a module without a file)."""
    if not is_custom(model):
        return None
    name = model.partition(":")[0]
    module = sys.modules.get(name)
    source = getattr(module, "__file__", None)
    if not source:
        return None
    try:
        path = Path(os.path.realpath(source))
        return ModelSource(module=name, path=str(path), sha256=digest(path))
    except OSError:
        return None


def search_paths() -> list[list[str]]:
    """The import paths the child processes have (profiler.child_env): a sweep worker puts this
    checkout first, a re-timing child the current folder; then PYTHONPATH and this
    interpreter's own path."""
    cwd = os.getcwd()
    python_path = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    rest = [p for p in sys.path if p]
    tail = [str(SOURCE_ROOT), cwd, *python_path, *rest]
    return [[cwd, *tail], [str(SOURCE_ROOT), *tail]]


def locate(module: str, path: list[str]) -> Path | None:
    """The file ``import module`` would load from ``path``, found without importing anything
    (package by package, as the path finder finds them); None when it is not found there or
    has no file (a built-in module)."""
    parts = module.split(".")
    if not all(part.isidentifier() for part in parts):
        return None
    search: list[str] | None = path
    spec = None
    for index in range(len(parts)):
        try:
            spec = PathFinder.find_spec(".".join(parts[: index + 1]), search)
        except (ImportError, ValueError, OSError):
            return None
        if spec is None:
            return None
        if index < len(parts) - 1:
            search = list(spec.submodule_search_locations or [])
            if not search:
                return None
    if spec is None or not spec.has_location or not spec.origin:
        return None
    return Path(os.path.realpath(spec.origin))


def check(
    label: str,
    model: str,
    recorded: ModelSource | None,
    trust: bool,
    say: Callable[[str], object],
    warn: Callable[[str], object],
) -> None:
    """Before a re-timing imports ``model`` (what ``label``'s result.json names): say which file
    it will import (``say``); refuse, in one line, unless it is the file the run recorded (path
    and hash), or ``trust`` (then ``warn`` says what is imported). Nothing for a built-in
    model."""
    if not is_custom(model):
        return
    name = model.partition(":")[0]
    found = {locate(name, path) for path in search_paths()}
    here = next(iter(found)) if len(found) == 1 else None
    if (
        here is not None
        and recorded is not None
        and recorded.module == name
        and str(here) == recorded.path
        and _digest_or_none(here) == recorded.sha256
    ):
        say(
            f"{label}'s model {model}: importing {here} (the file the run recorded, sha256 "
            f"{recorded.sha256[:12]})"
        )
        return
    if here is None:
        where = (
            "is not found on this machine's import path"
            if found == {None}
            else "resolves to different files for this command's processes ("
            + ", ".join(sorted(str(p) for p in found if p))
            + ")"
        )
    elif recorded is None:
        where = (
            f"would be imported from {here}, and the run recorded no file for it (a run "
            "of an older version, or a result.json edited by hand)"
        )
    else:
        where = (
            f"would be imported from {here}, which is not the file the run recorded "
            f"({recorded.path}, sha256 {recorded.sha256[:12]}): it changed since, or the run "
            "came from elsewhere"
        )
    if trust:
        warn(f"{label}'s model {model} {where}; importing it, as {TRUST} asks")
        return
    raise UserError(
        f"{label}'s model {model} {where}: re-timing imports and runs that code; "
        f"read it, then pass {TRUST} to run it"
    )


def _digest_or_none(path: Path) -> str | None:
    try:
        return digest(path)
    except OSError:
        return None
