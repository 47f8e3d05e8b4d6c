"""Sweeps: a backend x batch-size matrix of `profile.py run` cells, spread over the GPUs.

This module plans a sweep: the options parsed and checked, every cell's configuration validated
before the first one starts, and the cells listed (``SweepPlan``; ``cell_job`` is one cell as an
executor runs it). profiler.sweep.runner runs a plan; profiler.sweep.record keeps its manifest.

An option declared with an ``axis`` (--max-new-tokens, --src-len, --prompt-len, --seq-len,
--image-size) may be given a comma-separated list: the grid then holds one cell per value too,
named ``<backend>_bs<N>..._<axis><value>`` (e.g. ``_new16``).
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from profiler import runs, units
from profiler.errors import UserError
from profiler.runs.config import (
    RunConfig,
    check_path_component,
    check_processes,
    config_to_json,
    run_name,
    unkeyed,
)
from profiler.runs.manifest import (
    axis_options,
    axis_values,
    cell_label,
    cell_name,
    shared_options,
)
from profiler.runs.workloads import workload as workload_facts
from profiler.sweep import executors
from profiler.sweep.cell import CellJob

# ---- swept options (a list of values where a run takes one) ---------------------------------


def parse_axes(options: dict[str, Any]) -> dict[str, Any]:
    """The options with their axis values parsed: ``"64"`` -> 64, ``"16,64"`` -> [16, 64]
    (a list is an axis of the grid). Values that are numbers already are kept."""
    parsed = dict(options)
    for key, spec in axis_options().items():
        value = parsed.get(key)
        if not isinstance(value, str):
            continue
        flag = spec.flags[0]
        values = []
        for item in _split(value, flag, "16,64,256"):
            try:
                values.append(int(item))
            except ValueError:
                raise UserError(
                    f"{flag}: {item!r} is not a whole number (give one, or a "
                    "comma-separated list such as 16,64,256)"
                ) from None
        _no_duplicates(values, flag, "value")
        parsed[key] = values if len(values) > 1 else values[0]
    return parsed


def default_name(model: str) -> str:
    return "sweep_" + (re.sub(r"[^A-Za-z0-9._-]", "_", model).strip("._-") or "model")


# ---- parsing and validation ----------------------------------------------------------------


def parse_backends(text: str) -> list[str]:
    from profiler.collect import backends

    names = _split(text, "--backends", "pytorch_fp32,ttrt_fp16")
    for name in names:
        try:
            backends.get(name)
        except UserError as error:
            raise UserError(f"--backends: {error}") from None
    _no_duplicates(names, "--backends", "backend")
    return names


def parse_batch_sizes(text: str) -> list[int]:
    sizes = []
    for item in _split(text, "--bs", "1,8,32"):
        try:
            sizes.append(int(item))
        except ValueError:
            raise UserError(
                f"--bs: {item!r} is not a whole number (give a comma-separated list such as 1,8,32)"
            ) from None
        if sizes[-1] < 1:
            raise UserError(f"--bs: batch sizes must be at least 1 (got {sizes[-1]})")
    _no_duplicates(sizes, "--bs", "batch size")
    return sizes


def _split(text: str, flag: str, example: str) -> list[str]:
    items = [item.strip() for item in text.split(",")]
    if not any(items):
        raise UserError(f"{flag} is empty: give a comma-separated list such as {example}")
    if not all(items):
        raise UserError(
            f"{flag} {text!r} has an empty item: give a comma-separated list such as {example}"
        )
    return items


def _no_duplicates(items: list[Any], flag: str, what: str) -> None:
    seen = set()
    for item in items:
        if item in seen:
            raise UserError(f"{flag} names {what} {item} twice: each cell of a sweep runs once")
        seen.add(item)


def cell_config(
    options: dict[str, Any],
    backend: str,
    batch_size: int,
    axis: dict[str, Any] | None = None,
    sweep_dir: Path = Path("runs"),
    trace_dir: Path = Path("tb_logs"),
) -> RunConfig:
    """One cell's RunConfig: the shared options (keyed as in the manifest) with the cell's
    backend, batch size and value of each swept option, writing into the sweep's folders. A cell
    with swept values gets the folder the sweep names it: `run` names a run
    ``<backend>_bs<N>_<--name>``, so --name is the rest of the cell's name."""
    shared = {k: v for k, v in options.items() if k in shared_options()}
    name = None
    if axis:
        full = cell_name(
            backend, batch_size, options["model"], options.get("workload", "forward"), axis
        )
        name = full[len(run_name(backend, batch_size, name="x")) - 1 :]
    return RunConfig(
        backend=backend,
        batch_size=batch_size,
        name=name,
        runs_dir=sweep_dir,
        tb_dir=trace_dir,
        **unkeyed({**shared, **(axis or {})}),
    )


def validate(options: dict[str, Any], backend_names: list[str], batch_sizes: list[int]) -> None:
    """Every cell's configuration must be valid before the first one starts."""
    for axis in axis_values(options):
        for backend in backend_names:
            for batch_size in batch_sizes:
                cell_config(options, backend, batch_size, axis)


@dataclass(frozen=True)
class PlannedCell:
    """One cell of the grid, named once when the sweep is planned: its backend, batch size and
    value of each swept option (``axis``: empty when none is), its folder's ``name`` in the sweep
    (``<backend>_bs<N>...``, the name `run` gives that run) and its ``label`` in progress lines
    (``ttrt_fp16 bs 8``)."""

    backend: str
    batch_size: int
    axis: dict[str, Any]
    name: str
    label: str

    @property
    def group(self) -> str:
        """What the cells one verdict compares share: batch size and swept values."""
        return repr((self.batch_size, sorted(self.axis.items())))


def planned_cells(
    options: dict[str, Any], backends: list[str], batch_sizes: list[int]
) -> list[PlannedCell]:
    """The grid's cells in the order they run: backend, then batch size, then swept values."""
    model, workload = options["model"], options.get("workload", "forward")
    return [
        PlannedCell(
            backend,
            batch_size,
            axis,
            cell_name(backend, batch_size, model, workload, axis),
            cell_label(backend, batch_size, axis),
        )
        for backend in backends
        for batch_size in batch_sizes
        for axis in axis_values(options)
    ]


@dataclass
class SweepPlan:
    name: str
    backends: list[str]
    batch_sizes: list[int]
    baseline: str
    options: dict[str, Any]
    runs_dir: Path = Path("runs")
    tb_dir: Path = Path("tb_logs")
    resume: bool = False
    cell_timeout_s: float | None = None
    cells: list[PlannedCell] = field(default_factory=list)
    executor: str = "local"
    gpus: list[str] | None = None  # None: every visible GPU (the executor finds them)
    isolate: bool = False
    ray_address: str | None = None
    ray_shared_fs: bool = False
    #: windows per cell in fresh processes, its run's the first (profiler.sweep.rounds)
    processes: int = 1
    target_noise: float | None = None  # relative: 0.02 for --target-noise 2
    budget_s: float | None = None
    #: --fixed-rounds: every cell takes all --processes rounds (else the rounds are sequential:
    #: a cell whose comparisons are decided leaves them, profiler.analysis.sequential)
    fixed_rounds: bool = False

    def comparisons(self) -> list[tuple[str, str]]:
        """(baseline cell, cell) of every verdict the sweep takes: each backend against the
        baseline at the same batch size and swept values."""
        baseline = {c.group: c.name for c in self.cells if c.backend == self.baseline}
        return [(baseline[c.group], c.name) for c in self.cells if c.backend != self.baseline]

    @property
    def sweep_dir(self) -> Path:
        return self.runs_dir / self.name

    @property
    def trace_dir(self) -> Path:
        return self.tb_dir / self.name

    def cell_name(self, backend: str, batch_size: int, axis: dict[str, Any] | None = None) -> str:
        """The planned cell's name, its folder's in the sweep (``<backend>_bs<N>...``)."""
        key = (backend, batch_size, axis or {})
        return next(c.name for c in self.cells if (c.backend, c.batch_size, c.axis) == key)


def plan(
    backends: str,
    batch_sizes: str,
    options: dict[str, Any],
    name: str | None = None,
    baseline: str | None = None,
    runs_dir: Path = Path("runs"),
    tb_dir: Path = Path("tb_logs"),
    resume: bool = False,
    cell_timeout_s: float | None = None,
    executor: str = "local",
    gpus: str | None = None,
    isolate: bool = False,
    ray_address: str | None = None,
    ray_shared_fs: bool = False,
    processes: int | None = None,
    target_noise: float | None = None,
    budget_s: float | None = None,
    fixed_rounds: bool = False,
) -> SweepPlan:
    backend_names = parse_backends(backends)
    sizes = parse_batch_sizes(batch_sizes)
    if baseline is None:
        baseline = backend_names[0]
    elif baseline not in backend_names:
        raise UserError(
            f"--baseline {baseline!r} is not one of --backends ({', '.join(backend_names)})"
        )
    if cell_timeout_s is not None and not cell_timeout_s > 0:
        raise UserError(f"--cell-timeout must be more than 0 seconds (got {cell_timeout_s})")
    name = check_path_component(name or default_name(options["model"]), "sweep name")
    runs.check_separate_roots(runs_dir, tb_dir)
    options = parse_axes(options)
    validate(options, backend_names, sizes)
    executors.get(executor)  # an unknown name is one line now, not after the first cell
    check_ray_options(executor, ray_address, ray_shared_fs)
    gpu_list = _parse_gpus(gpus, executor)
    processes = check_sampling(
        processes,
        target_noise,
        budget_s,
        executor,
        gpu_list,
        options.get("workload", "forward"),
        fixed_rounds,
        compares=len(backend_names) > 1,
    )
    return SweepPlan(
        name=name,
        backends=backend_names,
        batch_sizes=sizes,
        baseline=baseline,
        options=options,
        runs_dir=runs_dir,
        tb_dir=tb_dir,
        resume=resume,
        cell_timeout_s=cell_timeout_s,
        cells=planned_cells(options, backend_names, sizes),
        executor=executor,
        gpus=gpu_list,
        isolate=isolate,
        ray_address=ray_address,
        ray_shared_fs=ray_shared_fs,
        processes=processes,
        target_noise=None if target_noise is None else target_noise / 100,
        budget_s=budget_s,
        fixed_rounds=fixed_rounds,
    )


#: --processes when not given: on GPUs, five rounds (five pairs for the paired design: on the
#: H100, docs/gpu/h100/verdicts, pairing pays for GPU time from five pairs at the measured
#: within-process correlation, and the simulation calibrated on H100 noise suggests five); on
#: a machine without GPUs three where the sweep compares backends (a CPU's one window a side
#: has no spread of its own, and the H100's floor says nothing of a CPU: such a verdict is
#: withheld, profiler.analysis.verdict; three rounds are the fewest whose spread a verdict reads,
#: and the sequential rule lets a decided cell go after two), none for one backend.
#: QUICK_PROCESSES is the quick mode (--processes 3: unpaired,
#: wider intervals).
DEFAULT_PROCESSES_GPU = 5
DEFAULT_PROCESSES_CPU = 3
QUICK_PROCESSES = 3
DEFAULT_PROCESSES = DEFAULT_PROCESSES_GPU


def check_sampling(
    processes: int | None,
    target_noise: float | None,
    budget_s: float | None,
    executor: str,
    gpus: list[str] | None,
    workload: str,
    fixed_rounds: bool = False,
    compares: bool = True,
) -> int:
    """--processes, --target-noise and --budget checked; the number of processes per cell
    (``compares``: the sweep takes verdicts, more than one backend; a CPU sweep of one backend
    takes no rounds unless asked)."""
    if processes is not None:
        check_processes(processes)
    if target_noise is not None and not 0 < target_noise < 100:
        raise UserError(
            f"--target-noise is a percentage between 0 and 100 (got {units.plain(target_noise)})"
        )
    if budget_s is not None and not budget_s > 0:
        raise UserError(f"--budget must be more than 0 seconds (got {units.plain(budget_s)})")
    if budget_s is not None and target_noise is None and fixed_rounds:
        raise UserError(
            "--budget limits --target-noise or the sequential rounds, not --fixed-rounds: "
            "pass --target-noise P, or leave out --fixed-rounds"
        )
    sampled = (processes or 1) > 1 or target_noise is not None
    if sampled and not workload_facts(workload).sampled:
        raise UserError(
            "--processes and --target-noise sample forward windows; they do not "
            f"apply to --workload {workload} yet"
        )
    if processes is None:  # Ray: when this machine has GPUs (a cluster's head usually does)
        on_gpus = gpus if executor == "local" else _local_gpus()
        default = DEFAULT_PROCESSES_GPU if on_gpus else DEFAULT_PROCESSES_CPU if compares else 1
        processes = default if workload_facts(workload).sampled else 1
    return processes


def check_ray_options(executor: str, ray_address: str | None, ray_shared_fs: bool) -> None:
    if executor != "ray":
        if ray_address is not None or ray_shared_fs:
            flag = "--ray-address" if ray_address is not None else "--ray-shared-fs"
            raise UserError(f"{flag} needs --executor ray")
        return
    from profiler.sweep.executors.ray import check_reachable, import_ray

    import_ray()  # one line now, before the sweep folder is made, when Ray is missing
    if ray_address:
        check_reachable(ray_address)


def _local_gpus() -> list[str]:
    from profiler.sweep.executors.local import visible_gpus

    return visible_gpus()


def _parse_gpus(text: str | None, executor: str) -> list[str] | None:
    """--gpus for the local executor (checked against this machine's GPUs); other executors
    place cells on their cluster's GPUs."""
    if executor != "local":
        if text is not None:
            raise UserError(
                f"--gpus picks GPUs of this machine: the {executor} executor places cells itself"
            )
        return None
    from profiler.sweep.executors.local import parse_gpus, visible_gpus

    return parse_gpus(text, visible_gpus())


def cell_job(p: SweepPlan, cell: PlannedCell, replace: bool = False) -> CellJob:
    """One cell as an executor runs it: its RunConfig and its log file; ``replace``: the cell's
    folder may be replaced (a damaged cell of this sweep, run again on --resume)."""
    name = cell.name
    config = cell_config(
        p.options, cell.backend, cell.batch_size, cell.axis, p.sweep_dir, p.trace_dir
    )
    if replace:
        config = dataclasses.replace(config, replace=True)
    assert config.run_name == name, (config.run_name, name)  # the folder the sweep reads
    return CellJob(
        name=name,
        config=config_to_json(config),
        log_path=str(p.sweep_dir / "logs" / f"{name}.log"),
        timeout_s=p.cell_timeout_s,
    )
