"""Every run option, declared once on RunConfig, reaches the run through `run`, `sweep`, `ncu`
and `nsys`. Each field gets a value other than its default; the commands are stopped at the
boundary where they hand the run on (harness.run, the cell's subprocess, the tool's command
line), and the run's argument list is parsed back by `run`. A field added to RunConfig with
config.option() is probed with no change here; one added without it fails the first test."""

from __future__ import annotations

import dataclasses
import subprocess
import typing
from pathlib import Path

import pytest

from profiler.cli.run_commands import NCU_SETS, NSYS_SETS
from profiler.errors import UserError
from profiler.runs.config import RunConfig, run_options
from profiler.runs.manifest import SWEEP_SETS

NOT_OPTIONS = {"extra"}  # free-form notes, set by code, not by a flag
# a valid value for the fields whose type alone does not give one
# (a backend that runs without a GPU: one that needs a GPU is refused here before the harness)
KNOWN = {"backend": "pytorch_bf16", "model": "tests.tiny_models:conv_net"}


def probe_value(name: str):
    """A valid value other than the field's default, from its type."""
    if name in KNOWN:
        return KNOWN[name]
    spec = run_options()[name]
    default = getattr(RunConfig(), name)
    kind = typing.get_type_hints(RunConfig)[name]
    if isinstance(spec.choices, tuple):
        return next(choice for choice in spec.choices if choice != default)
    args = [a for a in typing.get_args(kind) if a is not type(None)] or [kind]
    kind = args[0]
    if kind is bool:
        return not default
    if kind is int:
        return (default or 1) + 2
    if kind is float:
        return 0.25
    if kind is Path:
        return Path(f"probe_{name}")
    if kind is str:
        return f"probe-{name.replace('_', '-')}"
    raise AssertionError(f"no probe value for RunConfig.{name} of type {kind}: add one to KNOWN")


#: options that exclude each other: each test runs once without each of them
EXCLUSIVE = ("min_time", "iters")


@pytest.fixture(params=EXCLUSIVE)
def left_out(request) -> str:
    return request.param


def probes(left_out: str) -> dict:
    """A probe value for every option but ``left_out`` (one of EXCLUSIVE)."""
    return {name: probe_value(name) for name in run_options() if name != left_out}


def argv(values: dict) -> list[str]:
    """The flags that give ``values``, written from the declarations (not run_argv)."""
    args: list[str] = []
    for name, value in values.items():
        flags = run_options()[name].flags[0]
        if isinstance(value, bool):
            on, _, off = flags.partition("/")
            args += [on if value else off]
        else:
            args += [flags, str(value)]
    return args


@pytest.fixture
def parse_run(cli, monkeypatch):
    """`run` with its arguments, stopped where it hands the RunConfig to the harness (or, with
    --nproc above 1, to the launcher of the ranks)."""
    import profiler.collect.harness
    import profiler.collect.ranks

    seen = []

    def fake_run(config, quiet=False, **given):
        seen.append(config)
        raise UserError("stopped at the harness")

    monkeypatch.setattr(profiler.collect.harness, "run", fake_run)
    monkeypatch.setattr(profiler.collect.ranks, "run", fake_run)

    def parse(*args: str) -> RunConfig:
        done = cli("run", *args)
        assert seen and "stopped at the harness" in done.stderr, done
        return seen.pop()

    return parse


def assert_reaches(config: RunConfig, values: dict, set_by_command) -> None:
    for name, value in values.items():
        if name not in set_by_command:
            assert getattr(config, name) == value, f"--{name} did not reach the run"


def test_every_field_is_a_declared_option():
    names = {f.name for f in dataclasses.fields(RunConfig)}
    assert set(run_options()) == names - NOT_OPTIONS


def test_run(parse_run, left_out):
    values = probes(left_out)
    config = parse_run(*argv(values))
    assert config.options() == {**values, left_out: getattr(RunConfig(), left_out)}


class RecordingExecutor:
    """A sweep executor that records the cells' typed configs (what a worker would run) and
    runs none."""

    def __init__(self, configs: list) -> None:
        self.configs = configs

    def describe(self) -> str:
        return "nowhere"

    def run(self, jobs, on_start, on_done) -> None:
        from profiler.sweep.cell import outcome

        for job in jobs:
            self.configs.append(job.run_config())
            on_start(job, {})
            on_done(job, outcome("user-error", "stopped at the cell", 2, 0.0))


def test_sweep_cells(cli, monkeypatch, left_out):
    from profiler.sweep import runner as sweep

    commands = []

    monkeypatch.setattr(sweep, "make_executor", lambda plan: RecordingExecutor(commands))
    values = probes(left_out)
    shared = {k: v for k, v in values.items() if k not in SWEEP_SETS}
    done = cli(
        "sweep",
        "--backends",
        values["backend"],
        "--bs",
        str(values["batch_size"]),
        "--name",
        "probe",
        "--runs-dir",
        "r",
        "--tb-dir",
        "t",
        *argv(shared),
    )
    assert len(commands) == 1, done
    config = commands[0]
    assert_reaches(config, values, SWEEP_SETS)
    assert (config.backend, config.batch_size) == (values["backend"], values["batch_size"])
    assert (config.runs_dir, config.tb_dir, config.name) == (Path("r/probe"), Path("t/probe"), None)
    assert config.capture == "torch"  # every cell is traced for the table


def test_sweep_resume_compares_every_shared_option(cli, monkeypatch, left_out):
    import json

    from profiler.sweep import runner as sweep

    monkeypatch.setattr(sweep, "make_executor", lambda plan: RecordingExecutor([]))
    values = probes(left_out)
    shared = {k: v for k, v in values.items() if k not in SWEEP_SETS}
    base = ["--backends", "pytorch_fp32", "--bs", "1", "--name", "s"]
    cli("sweep", *base, "--model", values["model"])
    options = json.loads(Path("runs/s/sweep.json").read_text())["options"]
    assert set(options) == {run_options()[n].key for n in [*shared, left_out]}
    for name, value in shared.items():
        spec = run_options()[name]
        done = cli("sweep", *base, "--resume", *argv({"model": values["model"], name: value}))
        if spec.resumable or name == "model":
            assert "pass the same options" not in done.stderr, name
        else:
            assert done.code == 2 and spec.flags[0].split("/")[0] in done.stderr, (name, done)


def test_ncu_runs(cli, parse_run, monkeypatch, left_out):
    from profiler.tools import ncu

    started = []

    def fake_subprocess(command, **kwargs):
        started.append(command)
        return subprocess.CompletedProcess(command, 1)

    monkeypatch.setattr(ncu, "locate_ncu", lambda: "ncu")
    monkeypatch.setattr(ncu.signals, "run_child", fake_subprocess)
    values = probes(left_out)
    offered = {k: v for k, v in values.items() if k not in NCU_SETS}
    done = cli("ncu", *argv(offered))
    assert "the run without ncu failed" in done.stderr, done
    config = parse_run(*started[0][3:])
    assert_reaches(config, values, NCU_SETS)
    assert config.capture == "torch"  # the ordinary run gives the kernel table


def test_ncu_run_under_ncu(parse_run, left_out):
    from profiler.tools import external

    values = probes(left_out)
    config = RunConfig(**values)
    under = dataclasses.replace(
        config, capture="cuda-profiler-api", iters=10, timed_warmup=3, min_time=None, repeat_runs=1
    )
    parsed = parse_run(*external.harness_command(under)[3:])
    assert parsed == under


def test_nsys_run(cli, parse_run, monkeypatch, left_out):
    from profiler.tools import external, nsys

    started = []

    def fake_logged(command, log_path, env=None, echo=True):
        started.append(command)
        return external.Finished(1, "")

    monkeypatch.setattr(nsys, "locate_nsys", lambda: "nsys")
    monkeypatch.setattr(nsys, "run_logged", fake_logged)
    values = probes(left_out)
    offered = {k: v for k, v in values.items() if k not in NSYS_SETS}
    cli("nsys", *argv(offered))
    command = started[0]
    run_args = command[command.index(str(external.PROFILE_PY)) + 2 :]
    config = parse_run(*run_args)
    assert_reaches(config, values, (*NSYS_SETS, "tb_dir"))
    assert (config.capture, config.repeat) == ("cuda-profiler-api", 1)
    # an empty trace folder outside --runs-dir (inside it the harness refused nested folders),
    # gone afterwards
    assert config.tb_dir.name.startswith("infer-profiler-nsys-")
    assert values["runs_dir"] not in config.tb_dir.parents and not config.tb_dir.exists()


@pytest.mark.parametrize(
    "command, skipped",
    [("run", ()), ("sweep", tuple(SWEEP_SETS)), ("ncu", NCU_SETS), ("nsys", NSYS_SETS)],
)
def test_help_lists_choices(cli, monkeypatch, command, skipped):
    monkeypatch.setenv("COLUMNS", "400")
    done = cli(command, "--help")
    for name, spec in run_options().items():
        if name in skipped:
            continue
        assert spec.flags[0].split("/")[0] in done.stdout, (command, name)
        if isinstance(spec.choices, tuple):  # in the option's help, not its metavar
            assert all(choice in done.stdout for choice in spec.choices), name


def test_shell_completion_offers_the_choices():
    import typer.main

    from profiler.cli.app import app
    from profiler.collect.backends import REGISTRY, all_backends

    all_backends()
    command = typer.main.get_command(app).commands["run"]
    params = {p.name: p for p in command.params}
    ctx = command.make_context("run", [], resilient_parsing=True)

    def offered(name: str, incomplete: str) -> list[str]:
        return [item.value for item in params[name].shell_complete(ctx, incomplete)]

    assert offered("compile_mode", "max") == ["max-autotune", "max-autotune-no-cudagraphs"]
    assert offered("capture", "") == ["torch", "cuda-profiler-api"]
    assert sorted(offered("backend", "")) == sorted(REGISTRY)
    assert sorted(offered("backend", "ttrt")) == ["ttrt_fp16", "ttrt_fp32", "ttrt_fp8", "ttrt_int8"]


def test_every_backend_name_has_one_implementation_and_every_implementation_a_name():
    """The backends' facts (profiler.runs.backends, torch-free) and the implementations the
    family modules register (profiler.collect.backends) name the same backends with the same
    facts; each family builds the parts of exactly the generation loops its facts say it runs,
    and the options offer exactly the names."""
    from profiler.collect.backends import REGISTRY, all_backends
    from profiler.collect.backends.base import GENERATION
    from profiler.runs import backends as facts

    implemented = {
        b.name: (b.family, b.precision, b.description, b.needs_cuda) for b in all_backends()
    }
    declared = {
        s.name: (s.family, s.precision, s.description, s.needs_cuda)
        for s in facts.BACKENDS.values()
    }
    assert implemented == declared
    assert set(REGISTRY) == set(facts.names())
    assert {s.family for s in facts.BACKENDS.values()} == set(facts.FAMILIES)
    assert all(s.name.startswith(s.family_facts.prefix) for s in facts.BACKENDS.values())
    for kind in (facts.SEQ2SEQ, facts.LM):
        builds = {family for family, parts in GENERATION.items() if kind in parts.builders}
        assert builds == {f.name for f in facts.families_generating(kind)}, kind
    from profiler.runs.config import run_options

    assert run_options()["backend"].choices() == facts.names()


def test_version(cli):
    from profiler import package_version

    done = cli("--version")
    assert done.code == 0 and done.stdout.strip().endswith(package_version())
    assert package_version().count(".") >= 1
