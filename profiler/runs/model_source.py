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
packages run too when it is imported, and are not checked. The processes the re-timing starts
compile the module from the bytes they read and hash again (``handed_on``, ``import_checked``),
never from cached bytecode. An identical file at another path (a moved or copied project) is
named as such, and imported only with ``--trust-model``: the modules it imports beside it may
differ. Built-in models (resnet50 ...) are this package's code and need no check. Torch-free."""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import importlib.util
import os
import sys
from collections.abc import Callable, Iterator
from importlib.machinery import PathFinder, SourceFileLoader
from pathlib import Path
from types import CodeType, ModuleType

import msgspec

from profiler import SOURCE_ROOT
from profiler.errors import UserError
from profiler.fsutil import read_small

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
) -> ModelSource | None:
    """Before a re-timing imports ``model`` (what ``label``'s result.json names): say which file
    it will import (``say``); refuse, in one line, unless it is the file the run recorded (path
    and hash), or ``trust`` (then ``warn`` says what is imported). Returns the file and the hash
    of what was checked, for the processes that import it (``handed_on``: they compile those
    bytes, and no others); None for a built-in model, or one trusted that has no one file
    here."""
    if not is_custom(model):
        return None
    name = model.partition(":")[0]
    found = {locate(name, path) for path in search_paths()}
    here = next(iter(found)) if len(found) == 1 else None
    sha = None if here is None else _digest_or_none(here)
    checked = None if here is None or sha is None else ModelSource(name, str(here), sha)
    if (
        checked is not None
        and recorded is not None
        and recorded.module == name
        and checked.path == recorded.path
        and checked.sha256 == recorded.sha256
    ):
        say(
            f"{label}'s model {model}: importing {here} (the file the run recorded, sha256 "
            f"{recorded.sha256[:12]})"
        )
        return checked
    where = _not_recorded(name, here, found, sha, recorded)
    if trust:
        warn(f"{label}'s model {model} {where}; importing it, as {TRUST} asks")
        return checked
    raise UserError(
        f"{label}'s model {model} {where}: re-timing imports and runs that code; "
        f"read it, then pass {TRUST} to run it"
    )


def _digest_or_none(path: Path) -> str | None:
    try:
        return digest(path)
    except OSError:
        return None


def _not_recorded(
    name: str,
    here: Path | None,
    found: set[Path | None],
    sha: str | None,
    recorded: ModelSource | None,
) -> str:
    """Why the file module ``name`` would be imported from (``here``, of hash ``sha``;
    ``found``: the files the command's processes would find) is not the one the run recorded,
    in words."""
    if here is None:
        return (
            "is not found on this machine's import path"
            if found == {None}
            else "resolves to different files for this command's processes ("
            + ", ".join(sorted(str(p) for p in found if p))
            + ")"
        )
    if recorded is None:
        return (
            f"would be imported from {here}, and the run recorded no file for it (a run "
            "of an older version, or a result.json edited by hand)"
        )
    if recorded.module == name and sha == recorded.sha256:
        return (
            f"would be imported from {here}, which is not the file the run recorded but the "
            f"same file at another path (the run recorded {recorded.path}, sha256 "
            f"{recorded.sha256[:12]}; the project was moved or copied): the modules it "
            "imports beside it may differ"
        )
    return (
        f"would be imported from {here}, which is not the file the run recorded "
        f"({recorded.path}, sha256 {recorded.sha256[:12]}): it changed since, or the run "
        "came from elsewhere"
    )


#: in the environment of the processes a re-timing starts: the model files it checked (a JSON
#: list of ModelSource), which they compile from the checked bytes (``import_checked``)
CHECKED_ENV = "INFER_PROFILER_CHECKED_MODELS"
#: the largest model file compiled from its checked bytes
MAX_SOURCE_BYTES = 64 << 20


@contextlib.contextmanager
def handed_on(sources: list[ModelSource | None]) -> Iterator[None]:
    """For the block: the processes this one starts import each checked model module from the
    bytes that were checked (CHECKED_ENV), not from whatever the import system finds."""
    given = [s for s in sources if s is not None]
    before = os.environ.get(CHECKED_ENV)
    if given:
        os.environ[CHECKED_ENV] = msgspec.json.encode(given).decode()
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(CHECKED_ENV, None)
        else:
            os.environ[CHECKED_ENV] = before


def checked_for(module: str) -> ModelSource | None:
    """The checked file of ``module`` a re-timing handed on (CHECKED_ENV), or None."""
    text = os.environ.get(CHECKED_ENV)
    if not text:
        return None
    try:
        given = msgspec.json.decode(text, type=list[ModelSource])
    except (msgspec.DecodeError, msgspec.ValidationError):
        raise UserError(f"{CHECKED_ENV} is not a list of checked model files") from None
    return next((s for s in given if s.module == module), None)


class _CheckedLoader(SourceFileLoader):
    """A module's loader that runs the code compiled from the checked bytes: no bytecode is
    read from a cache (a stale .pyc whose mtime and size match would run other code) or
    written to one."""

    def __init__(self, name: str, path: str, code: CodeType) -> None:
        super().__init__(name, path)
        self._code = code

    def get_code(self, fullname: str) -> CodeType:
        return self._code


def import_checked(source: ModelSource) -> ModuleType:
    """The module ``source`` names, imported from the file the re-timing checked, compiled from
    its bytes once they are read and hashed again: a file changed since the check is refused in
    one line. Its packages are imported as usual (their ``__init__.py`` files are not checked:
    the module doc)."""
    name = source.module
    done = sys.modules.get(name)
    if done is not None and getattr(done, "__checked_sha256__", None) == source.sha256:
        return done
    parent, _, child = name.rpartition(".")
    if parent:
        importlib.import_module(parent)
    data = read_small(Path(source.path), MAX_SOURCE_BYTES, "model file")
    if hashlib.sha256(data).hexdigest() != source.sha256:
        raise UserError(
            f"{source.path} changed after it was checked (sha256 {source.sha256[:12]}, now "
            f"{hashlib.sha256(data).hexdigest()[:12]}): not imported"
        )
    code = compile(data, source.path, "exec", dont_inherit=True)
    loader = _CheckedLoader(name, source.path, code)
    package = Path(source.path).name == "__init__.py"
    spec = importlib.util.spec_from_file_location(
        name,
        source.path,
        loader=loader,
        submodule_search_locations=[str(Path(source.path).parent)] if package else None,
    )
    assert spec is not None  # a path and a loader were given
    module = importlib.util.module_from_spec(spec)
    module.__dict__["__checked_sha256__"] = source.sha256
    sys.modules[name] = module
    try:
        loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    if parent:
        setattr(sys.modules[parent], child, module)
    return module
