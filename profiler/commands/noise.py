"""`noise`: this machine's noise floor. One fixed config timed in K fresh processes (the rounds
of profiler.sweep.rounds), the spreads inside and between them (profiler.analysis.floor), the
GPU's clock state around them and the settings that move the floor (NVML, the host); each
process also times the config at twice the batch size, for the within-process correlation rho
of both figures that decides whether a verdict pairs (profiler.analysis.floor.within_process_rho).
Kept per machine kind for the verdicts (profiler.runs.noise_floor) unless --no-save. Changes no
setting."""

from __future__ import annotations

import dataclasses
import socket
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from profiler import signals
from profiler.commands.sink import Sink
from profiler.errors import UserError, os_error_line
from profiler.notices import Say

if TYPE_CHECKING:
    from profiler.runs.config import RunConfig
    from profiler.runs.gpu_record import GpuState
    from profiler.runs.noise_floor import NoiseFloor
    from profiler.sweep.rounds import Sampled

#: the fixed config: a GPU-bound forward with many kernels, short enough to time in a second
GPU_DEFAULT = {"model": "resnet50", "backend": "pytorch_fp32", "bs": 8, "iters": 100}
#: on a machine without a GPU, a small one (a CPU's resnet50 takes seconds per call)
CPU_DEFAULT = {"model": "resnet18", "backend": "pytorch_fp32", "bs": 1, "iters": 20}
#: the cells of a round: the fixed config, then the second config rho pairs it with
FIXED, SECOND = "noise", "noise-pair"


def run(
    processes: int = 5,
    model: str | None = None,
    backend: str | None = None,
    bs: int | None = None,
    iters: int | None = None,
    save: bool = True,
    floors_dir: Path | None = None,
    *,
    sink: Sink,
    command: str = "python profile.py",
) -> dict[str, Any]:
    """``sink``: profiler.cli.output.Output. Returns the floor as a dict."""
    from profiler.runs.config import check_processes

    check_processes(processes, 2, ": the floor is the spread between processes")
    from profiler.collect.gpu_state import gpu_state_now
    from profiler.runs.noise_floor import check_keepable, cpu_kind
    from profiler.sweep.executors.local import visible_gpus

    on_gpu = bool(visible_gpus())
    fixed, config = _fixed_config(on_gpu, model, backend, bs, iters)
    second = dataclasses.replace(config, batch_size=2 * config.batch_size)
    if save:  # before the measurement, which a floor that cannot be kept would lose
        check_keepable(floors_dir, None if on_gpu else cpu_kind())
    warmup = "the default" if config.timed_warmup is None else config.timed_warmup
    workload = (
        f"{config.model} {config.backend} bs {config.batch_size}, {config.iters} "
        f"iterations after {warmup} warm-up"
    )
    say = sink.note
    say(
        f"noise floor: {workload}, in {processes} fresh processes, each also timing bs "
        f"{second.batch_size} (the correlation of two configs in one process)"
    )
    before = gpu_state_now()
    sampled = _sample({FIXED: config, SECOND: second}, fixed["iters"], processes, say)
    after = gpu_state_now()
    if sampled.errors:
        first, why = next(iter(sampled.errors.items()))
        which = "fixed" if first == FIXED else "second"
        raise UserError(f"noise: the {which} config failed: {why}")
    floor = _floor(sampled, before, after, workload, on_gpu, command)
    floor = msgspec.structs.replace(
        floor, rho_workload=f"{config.model} {config.backend} bs {second.batch_size}"
    )
    path, unkept = _keep(floor, floors_dir) if save else (None, None)
    from profiler.report.sentences import gpu_state_line

    state = {"before": gpu_state_line(before), "after": gpu_state_line(after)}
    _show(floor, path, state, unkept, sink)
    if unkept is not None:
        raise unkept
    document: dict[str, Any] = msgspec.to_builtins(floor)
    return document


def _floor(
    sampled: Sampled, before: GpuState, after: GpuState, workload: str, on_gpu: bool, command: str
) -> NoiseFloor:
    """The floor from the sampled windows, with the machine's state and settings around them
    and what to change."""
    from profiler.analysis.floor import floor_of, suggestions, within_process_rho
    from profiler.collect.gpu_state import machine_settings
    from profiler.report.sentences import floor_tip
    from profiler.runs.noise_floor import NoiseFloor, cpu_kind

    windows = sampled.windows[FIXED]
    figures = floor_of(windows)
    rho = within_process_rho(windows, sampled.windows.get(SECOND, []))
    settings = machine_settings()
    tips = suggestions(
        settings, figures["within_window_cv"], figures["between_process_cv"], on_gpu, command
    )
    clocks = [s.sm_clock_mhz for s in (before, after)]
    return NoiseFloor(
        gpu=(sampled.devices.get(FIXED) or "unknown GPU") if on_gpu else cpu_kind(),
        host=socket.gethostname(),
        measured=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        workload=workload,
        processes=len(windows),
        sm_clock_mhz=clocks,
        throttle_reasons=sorted({r for s in (before, after) for r in s.throttle_reasons}),
        settings=settings,
        suggestions=[floor_tip(tip) for tip in tips],  # kept in words
        **figures,
        **rho,
    )


def _fixed_config(
    on_gpu: bool, model: str | None, backend: str | None, bs: int | None, iters: int | None
) -> tuple[dict[str, Any], RunConfig]:
    """The fixed workload's values (the defaults, then the options given) and its config."""
    from profiler.runs.config import RunConfig

    fixed: dict[str, Any] = dict(GPU_DEFAULT if on_gpu else CPU_DEFAULT)
    for key, value in (("model", model), ("backend", backend), ("bs", bs), ("iters", iters)):
        if value is not None:
            fixed[key] = value
    config = RunConfig(
        model=fixed["model"], backend=fixed["backend"], batch_size=fixed["bs"], iters=fixed["iters"]
    )  # validates every value in one line
    return fixed, config


def _sample(configs: dict[str, RunConfig], iters: int, processes: int, say: Say) -> Sampled:
    """The windows of each config (name -> RunConfig), one from each of ``processes`` fresh
    processes that time them all (a round, in alternating order)."""
    from profiler.sweep import rounds

    # Ctrl-C, SIGTERM, SIGHUP: the round's process stopped, one line, 130/143/129
    with signals.interruptible("noise", "no floor was kept"):
        return rounds.sample(
            {
                name: rounds.window_config(c, iters, c.timed_warmup or 0)
                for name, c in configs.items()
            },
            {},
            processes,
            say=say,
        )


def _keep(floor: NoiseFloor, floors_dir: Path | None) -> tuple[Path | None, UserError | None]:
    """Write the floor; where it could not be kept, the error that says why (raised after the
    floor is shown)."""
    from profiler.runs.noise_floor import write_floor

    try:
        return write_floor(floor, floors_dir), None
    except (OSError, UserError) as error:  # shown all the same, then one line says why
        return None, (
            error
            if isinstance(error, UserError)
            else UserError(
                f"the floor was measured but not kept in the noise-floor folder: "
                f"{os_error_line(error)}"
            )
        )


def _show(
    floor: NoiseFloor,
    path: Path | None,
    state: dict[str, str],
    unkept: UserError | None,
    sink: Sink,
) -> None:
    """The floor, as a document (--json) or on the console."""
    if sink.json:
        sink.document(
            "noise",
            {
                "floor": msgspec.to_builtins(floor),
                "saved_to": None if path is None else str(path),
                "gpu_state": state,
            },
        )
    else:
        from profiler.report.noise_view import print_floor

        print_floor(
            floor,
            path,
            state,
            sink.console,
            "--no-save" if unkept is None else "the error below says why",
        )
