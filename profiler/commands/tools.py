"""The commands around outside tools: `backends`, `tb-compat`, `tensorboard`, `nsys`, `ncu`.
Each returns the exit status."""

from __future__ import annotations

import sys
from pathlib import Path

from profiler.errors import UserError


def _say(line: str) -> None:
    print(line, file=sys.stderr)


def backends(sink) -> int:
    """``sink``: profiler.cli.output.Output, where the table or the --json document go."""
    from profiler.collect.backends import all_backends
    from profiler.report import run_view

    rows, cuda = run_view.backend_rows(all_backends())
    if sink.json:
        sink.document("backends", {"backends": rows})
    else:
        run_view.print_backends(rows, cuda, sink.console)
    return 0


def tb_compat(target: str, out: Path | None, sink) -> int:
    from profiler.runs.layout import compat_dir_for
    from profiler.runs.targets import traces_of
    from profiler.trace.tb_compat import write_compat_copy

    for trace in traces_of(target):
        result = write_compat_copy(trace, compat_dir_for(trace) if out is None else out)
        changes = ", ".join(f"{k}: {v}" for k, v in result.renamed.items()) or "nothing to change"
        sink.line(f"{result.written}  ({changes})")
    return 0


def tensorboard(logdir: Path, port: int | None, bind_all: bool, sink) -> int:
    """0 after Ctrl-C; 128 + the signal's number after SIGTERM or SIGHUP."""
    from profiler.fsutil import clean_tree
    from profiler.tools import tensorboard as tb

    print("warning: the profiler plugin's page loads Google Charts and cdnjs, so it needs the "
          "internet in the browser (offline it stays a spinner); for a file that opens "
          "anywhere use `profile.py report RUN [RUN_B]`", file=sys.stderr)
    clean_tree(logdir)  # staging folders of killed runs would be listed as runs
    served = tb.serve(logdir, port=port, bind_all=bind_all, echo=sink.line)
    if served.server_status:
        raise UserError(f"TensorBoard exited with status {served.server_status} (its output: "
                        f"{served.log})")
    return served.exit_code


def nsys(options: dict, sink) -> int:
    from profiler.tools import nsys as nsys_tool

    result = nsys_tool.run(options, echo=_say)
    nsys_tool.print_result(result, echo=sink.line)
    return 1 if result.get("stats_error") else 0


def ncu(options: dict, top: int, step: int | None, launch_count: int, reuse: bool,
        chip: str | None, sink) -> int:
    from profiler.tools import ncu as ncu_tool

    result = ncu_tool.run(options, top=top, step=step, launch_count=launch_count, reuse=reuse,
                          chip=chip, echo=_say)
    ncu_tool.print_result(result, top=top, echo=sink.line)
    return 0
