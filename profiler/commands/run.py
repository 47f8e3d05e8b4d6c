"""`run`: one model x backend x batch size through the harness, then its result printed."""

from __future__ import annotations

import json
from pathlib import Path

from profiler import signals
from profiler.commands import loading_torch
from profiler.runs.config import RunConfig
from profiler.runs.result import result_text
from profiler.errors import UserError


def run(options: dict, sink, tb_compat: bool = False,
        command: str = "python profile.py") -> None:
    """``options``: RunConfig field -> value; ``sink``: profiler.cli.output.Output, where the
    result goes; ``command``: how the user started the program, for the ``next:`` hints."""
    config = RunConfig(**options)
    if tb_compat and config.capture != "torch":
        raise UserError("--tb-compat needs a trace: leave --capture at torch")
    with loading_torch():
        from profiler.collect import harness
    from profiler.report import run_view
    from profiler.runs.config import config_to_json
    from profiler.runs.layout import cache_dir

    sink.detail("config: " + ", ".join(f"{key}={value}" for key, value in
                                       sorted(config_to_json(config).items())))
    sink.detail(f"cache: {config.cache_dir or cache_dir()}")
    with signals.as_interrupts():  # SIGTERM, SIGHUP: like Ctrl-C
        result = harness.run(config, quiet=sink.json or sink.quiet)
    if tb_compat:
        from profiler.runs.layout import compat_dir_for
        from profiler.trace.tb_compat import write_compat_copy

        for trace in result.trace.files:
            written = write_compat_copy(Path(trace), compat_dir_for(Path(trace)))
            sink.note(f"tb-compat copy: {written.written}")
    if sink.json:  # the run's result.json, as written
        sink.document("run", json.loads(result_text(result)))
    else:
        run_view.print_result(result, sink.console, command=command,
                              hints=not sink.quiet)
