"""`run`: one model x backend x batch size through the harness, then its result printed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from profiler import signals
from profiler.commands import loading_line, loading_torch, no_gpu_here
from profiler.commands.sink import Sink
from profiler.errors import UserError
from profiler.runs.config import RunConfig
from profiler.runs.result import RunResult, result_to_dict


def run(
    options: dict[str, Any], sink: Sink, tb_compat: bool = False, command: str = "python profile.py"
) -> Path:
    """``options``: RunConfig field -> value; ``sink``: profiler.cli.output.Output, where the
    result goes; ``command``: how the user started the program, for the ``next:`` hints.
    Returns the run's folder."""
    from profiler.runs.layout import compat_dir_for
    from profiler.trace import tb_compat as compat

    config = RunConfig(**options)
    _refuse_cuda_only(config)
    if tb_compat and config.capture != "torch":
        raise UserError("--tb-compat needs a trace: leave --capture at torch")
    # tb_logs/<run>_tbcompat/: the copies of this run's traces (--tb-compat), or of the run
    # this one replaces (removed: stale); a folder that cannot take them is refused up front
    copies = compat_dir_for(config.tb_dir / config.run_name / "trace", of_run=True)
    if tb_compat:
        compat.check_compat_folder(copies)
    from profiler.collect import bytecode

    bytecode.precompile()  # a fresh machine: compile what the run imports on the other cores
    try:
        return _run(config, sink, tb_compat, copies, command)
    finally:  # a run that fails, or is stopped, before its timed window: the compile ends too
        bytecode.stop_precompile(others=False)


def _run(config: RunConfig, sink: Sink, tb_compat: bool, copies: Path, command: str) -> Path:
    from profiler.trace import tb_compat as compat

    line = loading_line("and the harness")
    if line and not sink.json:
        sink.note(line)
    with loading_torch():
        from profiler.collect import harness, ranks
    from profiler.runs.config import config_to_json
    from profiler.runs.layout import cache_dir
    from profiler.runs.phases import process_mark

    sink.detail(
        "config: "
        + ", ".join(f"{key}={value}" for key, value in sorted(config_to_json(config).items()))
    )
    sink.detail(f"cache: {config.cache_dir or cache_dir()}")
    with signals.as_interrupts():  # SIGTERM, SIGHUP: like Ctrl-C
        launch = ranks.run if config.nproc > 1 else harness.run  # --nproc N: N ranks
        result = launch(
            config, quiet=sink.json or sink.quiet, console=sink.err_console, started=process_mark
        )
    if tb_compat:
        _write_copies(result, copies, sink, command)
    elif compat.remove_copies(copies):
        sink.note(
            f"note: removed {copies}/, the tb-compat copy of the run this one replaced "
            "(--tb-compat makes a new one)"
        )
    show(result, sink, command)
    return result.run_dir


def show(result: RunResult, sink: Sink, command: str = "python profile.py") -> None:
    """What `run` prints once the run is written: its --json document (result.json's keys,
    "$schema" first), or its sections (profiler.report.sections.RUN, read from the result's
    ResultAnalysis), the ``next:`` hints spelled with ``command`` unless -q."""
    if sink.json:  # the run's result.json, as written
        sink.document("run", result_to_dict(result))
        return
    from profiler.report.run_view import print_result

    print_result(result, sink.console, command=command, hints=not sink.quiet)


def _refuse_cuda_only(config: RunConfig) -> None:
    """On a machine without a GPU, a backend that cannot run here is refused in one line before
    torch is imported, as the harness would (its package missing first, then the GPU it needs;
    the registry's checks import no torch). With a GPU maybe present, the harness decides."""
    hidden = no_gpu_here()
    if hidden is None:
        return
    from profiler.collect import backends

    backend = backends.get(config.backend)
    missing = backend.missing()
    if missing:
        raise UserError(f"backend {backend.name} cannot run here: {missing}")
    if backend.needs_cuda:
        raise UserError(f"backend {backend.name} cannot run here: needs a CUDA GPU, and {hidden}")


def _write_copies(result: RunResult, copies: Path, sink: Sink, command: str) -> None:
    """run --tb-compat, once the run is written: the copies, or (a full disk) one warning line
    saying how to make them; no copy of the replaced run is left either way."""
    from profiler.errors import os_error_line
    from profiler.trace import tb_compat as compat

    try:
        for done in compat.write_compat_folder([Path(t) for t in result.trace.files], copies):
            sink.note(f"tb-compat copy: {done.written}")
    except (UserError, OSError) as error:
        why = os_error_line(error) if isinstance(error, OSError) else str(error)
        compat.remove_copies(copies)
        sink.warn(
            f"the run is written ({result.run_dir}), its tb-compat copy is not ({why}); "
            f"`{command} tb-compat {result.run_dir}` makes it"
        )
