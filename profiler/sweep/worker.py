"""A sweep worker: a long-lived process that runs sweep cells one after another.

Started by the local executor (``profiler.sweep.executors.local``) with ``CUDA_VISIBLE_DEVICES`` set
to its one GPU. It reads one ``CellJob`` per line (JSON) on file descriptor 0 and answers each with
one line ``{"outcome": CellOutcome}`` on the descriptor that was 1 when it started. Before the first
cell it moves both away: 0 reads /dev/null and 1 goes where 2 goes (the worker's log), so nothing a
cell or a library prints can land in the reply stream; during a cell, 1 and 2 are the cell's log
(profiler.sweep.cell.run_job). It ends at the end of its input, after one cell with
``--one-cell`` (a fresh process per cell: ``sweep --isolate``), or, without running the cell it
was handed, when the sweep that started it is gone (its SIGINT, sent when the sweep dies, is
ignored between cells).
"""

import time

_began = time.perf_counter()  # the first cell's imports phase starts here (profiler.runs.phases)

import io  # noqa: E402
import os  # noqa: E402
import signal  # noqa: E402
import sys  # noqa: E402


def _private_channels() -> tuple[io.FileIO, io.FileIO]:
    """(requests, replies): the pipes the executor gave as 0 and 1, on descriptors of their own."""
    requests = os.fdopen(os.dup(0), "rb", buffering=0)
    replies = os.fdopen(os.dup(1), "wb", buffering=0)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    sys.stdout = os.fdopen(1, "w", buffering=1, encoding="utf-8", closefd=False)
    return requests, replies


def main(argv: list[str]) -> int:
    # the sweep that started this worker: named by it (by the time this line runs, a sweep
    # killed at once may be gone and the parent already another process)
    sweep = int(os.environ.get("INFER_PROFILER_SWEEP_PID") or os.getppid())
    requests, replies = _private_channels()
    # SIGINT stops a cell (run_job lets it through there); between cells it is remembered, not
    # raised, so a stop that arrives as a cell ends cannot lose that cell's reply, and a cell
    # handed over before the stop came is answered "interrupted" without being run (the sweep
    # closes a stopped worker's input: no later cell comes)
    early: list[int] = []  # until the cell module (imported after keep_bytecode) takes over
    signal.signal(signal.SIGINT, lambda signum, frame: early.append(signum))
    from profiler.collect import bytecode

    bytecode.keep_bytecode()  # before torch, as profile.py does: see profiler/collect/bytecode.py
    bytecode.precompile()
    from profiler.sweep import cell as cellrun

    cellrun.remember_stops(early)

    try:
        return _serve(requests, replies, sweep, "--one-cell" in argv)
    finally:  # a worker that ends (its sweep done or gone, its cells failed): no compile left
        bytecode.stop_precompile(others=False)


def _serve(requests: io.FileIO, replies: io.FileIO, sweep: int, one_cell: bool) -> int:
    """Answer each cell handed over on ``requests`` until the input ends (main's doc)."""
    import msgspec

    from profiler.sweep import cell as cellrun

    first = True
    try:
        for line in requests:
            if os.getppid() != sweep:  # the sweep is gone: its cell is not run
                return 1
            job = msgspec.json.decode(line, type=cellrun.CellJob)
            if cellrun.stop_requested():
                outcome = cellrun.outcome(
                    "interrupted", "interrupted (Ctrl-C)", 130, 0.0, **cellrun.where()
                )
            else:
                outcome = cellrun.run_job(job, process_mark=_began if first else None)
            first = False
            replies.write(msgspec.json.encode({"outcome": outcome}) + b"\n")
            if one_cell:
                break
    except BrokenPipeError:  # the sweep is gone
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
