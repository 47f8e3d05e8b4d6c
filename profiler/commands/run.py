"""`run`: one model x backend x batch size through the harness, then its result printed."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from profiler import signals
from profiler.commands import loading_torch
from profiler.runs.config import RunConfig
from profiler.runs.result import result_text
from profiler.errors import UserError


def run(options: dict, sink, tb_compat: bool = False) -> None:
    """``options``: RunConfig field -> value; ``sink``: profiler.cli.output.Output, where the
    result goes."""
    config = RunConfig(**options)
    if tb_compat and config.capture != "torch":
        raise UserError("--tb-compat needs a trace: leave --capture at torch")
    with loading_torch():
        from profiler.collect import harness
    from profiler.report import run_view

    with signals.as_interrupts():  # SIGTERM, SIGHUP: like Ctrl-C
        result = harness.run(config, quiet=sink.json)
    if tb_compat:
        from profiler.runs.layout import compat_dir_for
        from profiler.trace.tb_compat import write_compat_copy

        for trace in result.trace.files:
            written = write_compat_copy(Path(trace), compat_dir_for(Path(trace)))
            print(f"tb-compat copy: {written.written}", file=sys.stderr)
    if sink.json:  # the run's result.json, as written
        sink.document("run", json.loads(result_text(result)))
    else:
        run_view.print_result(result, sink.console)
