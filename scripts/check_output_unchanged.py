"""Prove that `summarize`, `compare` and `sweep` print the same bytes as before a change.

    python scripts/check_output_unchanged.py --capture /tmp/before   # on the old code
    python scripts/check_output_unchanged.py /tmp/before             # on the new code

Every command runs on the committed H200 fixtures (tests/fixtures/h200, h200_ncu) with a fixed
terminal width; stdout, stderr and exit status are kept, and so are the files written by
``--out``. The sweep's table comes from ``sweep --resume`` over a sweep folder built once, at
capture time, from the fixture runs (every cell finished, so no cell runs): the check copies
that folder and resumes it, which prints and writes the benchmark table. Exit status 0 when
every output is byte-identical, 1 otherwise (the differing files are listed).
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
            "sweep_table": (["sweep", *SWEEP_ARGS], Path("{sweep}")),
        }
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
    done = subprocess.run(
        [sys.executable, str(ROOT / "profile.py"), *args],
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
    with tempfile.TemporaryDirectory() as tmp:
        after = Path(tmp) / "after"
        shutil.copytree(args.before / "sweep_src", after / "sweep_src")
        capture_cases(after, args.before / "sweep_src")
        diff = differences(args.before, after)
    for name in diff:
        print(f"differs: {name}")
    print(
        f"{len(cases()) - len({d.split('/')[0] for d in diff})} of {len(cases())} outputs "
        "byte-identical"
    )
    return 1 if diff else 0


def capture_cases(into: Path, sweep_src: Path) -> None:
    """The cases alone, the sweep resumed from the folder captured before."""
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)
        for name, (args, cwd) in cases().items():
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
