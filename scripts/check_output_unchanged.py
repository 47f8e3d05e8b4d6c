"""Prove that `summarize`, `compare`, `sweep` and `run` print the same bytes as before a change.

    python scripts/check_output_unchanged.py --capture /tmp/before   # on the old code
    python scripts/check_output_unchanged.py /tmp/before             # on the new code

Every command runs on the committed H200 fixtures (tests/fixtures/h200, h200_ncu) with a fixed
terminal width; stdout, stderr and exit status are kept, and so are the files written by
``--out`` (the checkout's place written as {root} in every text, so a baseline captured in
another checkout, a `git worktree` of the old code, compares). The sweep's table comes from
``sweep --resume`` over a sweep folder built once, at capture time, from the fixture runs (every
cell finished, so no cell runs): the check copies that folder and resumes it, which prints and
writes the benchmark table. What `run` prints at its end (its view, or its ``--json`` document)
is drawn for every committed run of the fixture folders in RUN_FIXTURES through the code `run`
ends with (profiler.commands.run.show), without timing anything. Exit status 0 when every output
is byte-identical, 1 otherwise (the differing files are listed); a case the folder captured
before lacks is left out, and said.
"""

from __future__ import annotations

import argparse
import filecmp
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "h200"
NCU_FIXTURES = ROOT / "tests" / "fixtures" / "h200_ncu"
RUN = "pytorch_fp16_bs8"
VIEWS = ("all", "overview", "kernels", "categories", "operators")
SWEEP_CELLS = ("pytorch_fp16_bs8", "pytorch_fp32_bs8", "ttrt_fp16_bs8", "ttrt_fp32_bs8")
#: the fixture folders whose committed runs `run`'s ending draws (each run's result.json names its
#: latency.csv relative to the folder)
RUN_FIXTURES = (
    "h200",
    "llm_h200",
    "memory_h200",
    "h100_engines",
    "h100_generate",
    "h100_session",
    "cpu_sweeps",
)
#: what `run` prints once its result is written, for the result.json files named after the mode
#: ("human" or "json"): the command's own ending, handed each result read back
RUN_ENDING = """
import sys
sys.path.insert(0, sys.argv[1])
from pathlib import Path
from profiler.cli.output import Output
from profiler.commands.run import show
from profiler.runs.result import read_result
sink = Output(json=sys.argv[2] == "json")
for path in sys.argv[3:]:
    show(read_result(Path(path)), sink, "python profile.py")
"""
SWEEP_ARGS = [
    "--backends",
    "pytorch_fp32,pytorch_fp16,ttrt_fp32,ttrt_fp16",
    "--bs",
    "8",
    "--name",
    "fixture_sweep",
    "--resume",
]


def cases() -> dict[str, tuple[list[str], Path]]:
    """name -> (profile.py arguments, working folder); "{out}" is replaced by a scratch folder."""
    runs = FIXTURES / "runs"
    found = {f"summarize_{view}": (["summarize", RUN, "--view", view], FIXTURES) for view in VIEWS}
    found.update(
        {
            "summarize_json": (["summarize", RUN, "--json"], FIXTURES),
            "summarize_top5_folder": (
                ["summarize", str(runs / "ttrt_fp16_bs8"), "--top", "5"],
                ROOT,
            ),
            "summarize_out": (["summarize", RUN, "--out", "{out}"], FIXTURES),
            "summarize_ncu": (
                ["summarize", RUN, "--view", "kernels", "--ncu", str(NCU_FIXTURES / "runs" / RUN)],
                FIXTURES,
            ),
            "summarize_missing": (["summarize", "no_such_run"], FIXTURES),
            "compare": (["compare", "pytorch_fp16_bs8", "ttrt_fp16_bs8"], FIXTURES),
            "compare_same_family": (
                ["compare", "pytorch_fp32_bs8", "pytorch_fp16_bs8", "--top", "5"],
                FIXTURES,
            ),
            "compare_out": (
                ["compare", "pytorch_fp16_bs8", "ttrt_fp16_bs8", "--out", "{out}"],
                FIXTURES,
            ),
            "compare_json": (["compare", "pytorch_fp16_bs8", "ttrt_fp16_bs8", "--json"], FIXTURES),
            "compare_json_same_family": (
                ["compare", "pytorch_fp32_bs8", "pytorch_fp16_bs8", "--top", "5", "--json"],
                FIXTURES,
            ),
            "compare_json_trace": (
                ["compare", RUN, str(FIXTURES / "tb_logs" / "pytorch_fp32_bs8"), "--json"],
                FIXTURES,
            ),
            "compare_json_cpu": (
                [
                    "compare",
                    "runs/cpu_sweep/pytorch_fp32_bs2_resnet18",
                    "runs/cpu_sweep/torchscript_fp32_bs2_resnet18",
                    "--json",
                ],
                ROOT / "tests" / "fixtures" / "cpu_sweeps",
            ),
            "summarize_json_ncu": (
                ["summarize", RUN, "--json", "--ncu", str(NCU_FIXTURES / "runs" / RUN)],
                FIXTURES,
            ),
            "summarize_json_layers": (
                ["summarize", "ttrt_fp16_bs8", "--view", "layers", "--json"],
                FIXTURES,
            ),
            "summarize_json_phases": (
                ["summarize", "pytorch_fp16_bs1_cg_bs1", "--json", "--top", "5"],
                ROOT / "tests" / "fixtures" / "llm_h200",
            ),
            "sweep_table": (["sweep", *SWEEP_ARGS], Path("{sweep}")),
        }
    )
    for name in RUN_FIXTURES:
        folder = ROOT / "tests" / "fixtures" / name
        results = [str(p.relative_to(folder)) for p in sorted(folder.glob("runs/**/result.json"))]
        for mode in ("human", "json"):
            found[f"run_{mode}_{name}"] = (
                ["-c", RUN_ENDING, str(ROOT), mode, *results],
                folder,
            )
    return found


def build_sweep(folder: Path) -> None:
    """A finished sweep of the fixture runs: run folders, traces and a manifest written by the
    code under test at capture time (its cells' metrics included)."""
    sys.path.insert(0, str(ROOT))
    from profiler.analysis.sweep_analysis import cell_metrics
    from profiler.runs.manifest import OK, write_manifest
    from profiler.sweep import plan as sweep
    from profiler.sweep.record import start_manifest

    runs, tbs = folder / "runs" / "fixture_sweep", folder / "tb_logs" / "fixture_sweep"
    plan = sweep.plan(
        "pytorch_fp32,pytorch_fp16,ttrt_fp32,ttrt_fp16",
        "8",
        _default_options(),
        name="fixture_sweep",
        runs_dir=folder / "runs",
        tb_dir=folder / "tb_logs",
    )
    manifest = start_manifest(plan)
    for cell in SWEEP_CELLS:
        shutil.copytree(FIXTURES / "runs" / cell, runs / cell)
        shutil.copytree(FIXTURES / "tb_logs" / cell, tbs / cell)
    here = Path.cwd()
    os.chdir(FIXTURES)  # the fixtures' result.json name their traces relative to this folder
    try:
        for name, cell in manifest.cells.items():
            cell.status, cell.reason, cell.exit_code, cell.elapsed_s = OK, None, 0, 12.5
            cell.metrics = cell_metrics(runs / name)
    finally:
        os.chdir(here)
    manifest.created = "2026-01-01T00:00:00+00:00"
    manifest.command_line = ["profile.py", "sweep"]
    manifest.runs_dir, manifest.tb_dir = "runs/fixture_sweep", "tb_logs/fixture_sweep"
    write_manifest(runs, manifest)


def _default_options() -> dict:
    """Every option a sweep passes on, at its default (from the options table)."""
    from dataclasses import fields

    from profiler.runs.config import RunConfig, keyed, run_options
    from profiler.sweep import plan as sweep

    defaults = keyed({f.name: f.default for f in fields(RunConfig) if f.name in run_options()})
    return {key: value for key, value in defaults.items() if key in sweep.shared_options()}


def run_case(args: list[str], cwd: Path, into: Path, scratch: Path) -> None:
    out = scratch / "out"
    args = [a.replace("{out}", str(out)) for a in args]
    env = dict(os.environ, COLUMNS="160", TERM="dumb", NO_COLOR="1")
    env.pop("PYTHONPATH", None)
    env.pop("INFER_PROFILER_CACHE", None)
    program = [] if args[0] == "-c" else [str(ROOT / "profile.py")]  # run's ending: python -c
    done = subprocess.run(
        [sys.executable, *program, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=env,
    )
    into.mkdir(parents=True)
    (into / "stdout").write_text(_stable(done.stdout, out))
    # the sweep's last stderr lines carry its wall time: drop that one figure
    stderr = "\n".join(line for line in done.stderr.splitlines() if "sweep took" not in line)
    (into / "stderr").write_text(_stable(stderr, out))
    (into / "status").write_text(f"{done.returncode}\n")
    if out.is_dir():
        shutil.copytree(out, into / "files")
        for path in (into / "files").rglob("*"):  # a text file written names the checkout too
            try:
                text = path.read_text() if path.is_file() else None
            except UnicodeDecodeError:  # a binary file (Parquet) is kept as written
                text = None
            if text is not None:
                path.write_text(_stable(text, out))


def _stable(text: str, out: Path) -> str:
    """The scratch folder and the checkout's place written as {out} and {root}."""
    return text.replace(str(out), "{out}").replace(str(ROOT), "{root}")


def capture(into: Path) -> None:
    build_sweep(into / "sweep_src")
    capture_cases(into, into / "sweep_src")


def differences(before: Path, after: Path) -> list[str]:
    found = []

    def walk(cmp: filecmp.dircmp, prefix: str) -> None:
        found.extend(f"{prefix}{n} (only one side)" for n in cmp.left_only + cmp.right_only)
        _, mismatch, errors = filecmp.cmpfiles(cmp.left, cmp.right, cmp.common_files, shallow=False)
        found.extend(f"{prefix}{n}" for n in mismatch + errors)
        for name, sub in cmp.subdirs.items():
            walk(sub, f"{prefix}{name}/")

    walk(filecmp.dircmp(before / "cases", after / "cases"), "")
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", type=Path, help="folder of the outputs captured before")
    parser.add_argument(
        "--capture",
        action="store_true",
        help="write the outputs of the code as it is now into BEFORE",
    )
    args = parser.parse_args()
    if args.capture:
        if args.before.exists():
            sys.exit(f"error: {args.before} exists; give a new folder")
        capture(args.before)
        print(f"captured {len(cases())} outputs into {args.before}")
        return 0
    # the cases captured before: one added since has nothing to be compared with
    names = [name for name in cases() if (args.before / "cases" / name).is_dir()]
    for name in cases():
        if name not in names:
            print(f"not captured before: {name}")
    with tempfile.TemporaryDirectory() as tmp:
        after = Path(tmp) / "after"
        shutil.copytree(args.before / "sweep_src", after / "sweep_src")
        capture_cases(after, args.before / "sweep_src", names)
        diff = differences(args.before, after)
    for name in diff:
        print(f"differs: {name}")
    print(
        f"{len(names) - len({d.split('/')[0].split(' ')[0] for d in diff})} of {len(names)} "
        "outputs byte-identical"
    )
    return 1 if diff else 0


def capture_cases(into: Path, sweep_src: Path, names: list[str] | None = None) -> None:
    """The cases (those of ``names``, default all) alone, the sweep resumed from the folder
    captured before."""
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)
        for name, (args, cwd) in cases().items():
            if names is not None and name not in names:
                continue
            case_scratch = scratch / name
            case_scratch.mkdir()
            if str(cwd) == "{sweep}":
                cwd = case_scratch / "sweep"
                shutil.copytree(sweep_src, cwd)
                run_case(args, cwd, into / "cases" / name, case_scratch)
                shutil.copytree(
                    cwd / "runs" / "fixture_sweep",
                    into / "cases" / name / "files",
                    ignore=shutil.ignore_patterns("sweep.json", "*_bs*"),
                    dirs_exist_ok=True,
                )
            else:
                run_case(args, cwd, into / "cases" / name, case_scratch)


if __name__ == "__main__":
    sys.exit(main())
