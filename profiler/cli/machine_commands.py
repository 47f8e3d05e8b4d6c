"""The commands about this machine: `backends` (what can run here), `peaks` (the GPU's
ceilings) and `noise` (its noise floor).
"""

from __future__ import annotations

from pathlib import Path

import typer

from profiler.cli.guard import command_name, user_errors
from profiler.cli.output import Output


@user_errors
def backends(json_out: bool = typer.Option(False, "--json", help="Print as JSON.")) -> None:
    """List the backends, whether each can run on this machine, and why not."""
    from profiler.commands import tools

    tools.backends(Output(json=json_out))


@user_errors
def peaks(
    refresh: bool = typer.Option(False, "--refresh", help="Measure again even if cached."),
    cache_dir: Path | None = typer.Option(
        None,
        "--cache-dir",
        help="Folder for the measurements (default: peaks/ beside the "
        "engine cache: $XDG_CACHE_HOME/infer-profiler/peaks, ~/.cache when unset).",
    ),
    matmul_n: int | None = typer.Option(
        None,
        "--matmul-n",
        help="Matrix side n of the n x n matmuls (default 8192 on a GPU, 256 on a CPU).",
    ),
    copy_mib: int | None = typer.Option(
        None, "--copy-mib", help="Bytes copied per bandwidth measurement, MiB (default 1024 / 16)."
    ),
    json_out: bool = typer.Option(False, "--json", help="Print the measurement as JSON."),
) -> None:
    """Measure this GPU's ceilings once and cache them (matmul TFLOP/s, memory bandwidth).

    Dense matmul TFLOP/s per data type (FP32, TF32, FP16, BF16, FP8, INT8 where supported) and
    device-memory copy bandwidth.

    The roofline in `report`, `summarize` and `compare` reads them; without a measurement it
    falls back to a labelled datasheet table. On a CPU it measures the CPU (small sizes).
    """
    from profiler.commands.peaks import run as peaks_command

    peaks_command(
        refresh=refresh,
        cache_dir=cache_dir,
        matmul_n=matmul_n,
        copy_mib=copy_mib,
        sink=Output(json=json_out),
    )


@user_errors
def noise(
    processes: int = typer.Option(
        5, "--processes", help="Fresh processes to time the fixed config in (2 or more)."
    ),
    model: str | None = typer.Option(
        None,
        "--model",
        help="The fixed config's model (default resnet50 on a GPU, resnet18 on a CPU).",
    ),
    backend: str | None = typer.Option(
        None, "--backend", help="Its backend (default pytorch_fp32)."
    ),
    bs: int | None = typer.Option(
        None, "--bs", help="Its batch size (default 8 on a GPU, 1 on a CPU)."
    ),
    iters: int | None = typer.Option(
        None, "--iters", help="Timed iterations per process (default 100 on a GPU, 20 on a CPU)."
    ),
    save: bool = typer.Option(
        True,
        "--save/--no-save",
        help="Keep the floor for compare and sweep (noise/<kind>.json beside the engine cache: "
        "a GPU's name, a CPU's model).",
    ),
    json_out: bool = typer.Option(False, "--json", help="Print the floor as JSON."),
) -> None:
    """Measure this machine's noise floor and the settings that would lower it.

    How much one fixed config's p50 moves inside a timed window and between fresh processes,
    how much it moves with a second config (twice the batch size) timed in the same process
    (rho, per figure), the GPU's clocks around it, the smallest difference a compare can
    resolve here, and which settings would lower it: persistence mode, locked clocks, CPU
    pinning, CUDA graphs. It changes none of them.

    The floor is kept per machine kind (a GPU's name, a CPU's model); compare and sweep use its
    between-process spread to judge runs timed in one process each (on a CPU, without it, one
    process a side decides nothing), and its rho to choose whether to pair rounds.

    Examples:

    [b]python profile.py noise[/b]

    [b]python profile.py noise --processes 8 --model resnet18 --bs 32 --json[/b]
    """
    from profiler.commands.noise import run as noise_command

    noise_command(
        processes=processes,
        model=model,
        backend=backend,
        bs=bs,
        iters=iters,
        save=save,
        sink=Output(json=json_out),
        command=command_name(),
    )
