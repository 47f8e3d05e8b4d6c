"""profiler.runs.result: the run contract (RunResult, SweepManifest), the one target resolver, and
runs that never replace what they are not (another model's run, a sweep, their own trace)."""

import ast
import json
import math
import os
import stat
from pathlib import Path

import pytest

from profiler import runs
from profiler.analysis.run_analysis import RunAnalysis
from profiler.errors import UserError
from tests.conftest import FIXTURES, ROOT, link_kept_bytecode

RESULTS = sorted(FIXTURES.rglob("result.json"))
H200 = FIXTURES / "h200"
TINY = [
    "--model",
    "tests.tiny_models:conv_net",
    "--bs",
    "2",
    "--iters",
    "2",
    "--timed-warmup",
    "0",
    "--active",
    "1",
]


# ---- the contract ---------------------------------------------------------------------------


def test_there_are_committed_results_to_read():
    assert len(RESULTS) >= 10


@pytest.mark.parametrize("path", RESULTS, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_every_committed_result_reads_and_writes_back_its_keys(path):
    result = runs.read_result(path)
    original = json.loads(path.read_text())
    assert result.schema == runs.RESULT_SCHEMA and original["schema"] in (1, runs.RESULT_SCHEMA)
    assert result.run_name == path.parent.name
    assert result.timing.iters == original["timing"]["iters"]
    if original["schema"] == 1:  # upgraded: the iterations timed become the config's
        assert result.config.iters == result.timing.iters
    assert result.backend.precision == original["backend"]["precision"]
    assert result.backend.compile_s == original["backend"]["notes"].get("compile_s")
    assert result.backend.artifacts == original.get("artifacts", [])
    written = runs.result_to_dict(result)

    def same(old, new, where):  # everything the old file said is written back unchanged
        if isinstance(old, dict):
            for key, value in old.items():
                same(value, new[key], f"{where}.{key}")
        elif isinstance(old, float) and math.isnan(old):  # a non-finite output's checksum
            assert isinstance(new, float) and math.isnan(new), where
        else:  # a tuple field (gpu_state.load_average) is a list once written as JSON
            assert (list(new) if isinstance(new, tuple) else new) == old, where

    same({k: v for k, v in original.items() if k != "schema"}, written, "result")
    assert list(written)[:3] == ["schema", "run_name", "created"]


def test_backend_facts_are_named_and_the_rest_is_extra():
    result = runs.read_result(H200 / "runs" / "ttrt_fp16_bs8")
    facts = result.backend
    assert facts.compile_s == pytest.approx(7.0607, rel=1e-4) and facts.cache_load_s is None
    assert facts.warnings == [] and "tensorrt_build.log" in facts.artifacts
    assert facts.extra["engine_count"] == 1 and "compile_s" not in facts.extra
    notes = runs.result_to_dict(result)["backend"]["notes"]
    assert notes["compile_s"] == facts.compile_s and notes["cache"]["hit"] is False


def test_a_newer_schema_or_a_non_result_is_one_line(tmp_path):
    data = json.loads((H200 / "runs" / "pytorch_fp32_bs8" / "result.json").read_text())
    path = tmp_path / "result.json"
    path.write_text(json.dumps({**data, "schema": runs.RESULT_SCHEMA + 1}))
    with pytest.raises(UserError, match="update the profiler"):
        runs.read_result(path)
    path.write_text(json.dumps({"trace": {"files": [1, 2]}}))
    with pytest.raises(UserError, match="not a run result"):
        runs.read_result(path)
    assert runs.try_read_result(path) is None


def test_non_finite_checksum_is_written_as_null(tmp_path):
    import msgspec

    result = runs.read_result(H200 / "runs" / "pytorch_fp32_bs8")
    result = msgspec.structs.replace(
        result,
        output=msgspec.structs.replace(result.output, checksum=float("nan"), finite=False),
        numerics=runs.Numerics(finite=False, elements=8),
    )
    runs.write_result(tmp_path, result)
    on_disk = json.loads((tmp_path / "result.json").read_text())  # strict JSON parses
    assert on_disk["output"]["checksum"] is None
    # figures that are not finite stay in the file as null, as schema 1 wrote them
    assert on_disk["numerics"]["rel_l2_error"] is None and "skipped" not in on_disk["numerics"]
    assert on_disk["trace"]["dir"] is not None and on_disk["trace"]["skipped"] is None


def test_sweep_manifest_round_trip(tmp_path):
    manifest = runs.SweepManifest(
        name="s",
        model="resnet50",
        backends=["pytorch_fp32"],
        batch_sizes=[1],
        baseline="pytorch_fp32",
        options={"iters": 2},
        cells={"pytorch_fp32_bs1": runs.SweepCell("pytorch_fp32", 1)},
    )
    runs.write_manifest(tmp_path, manifest)
    again = runs.read_manifest(tmp_path)
    assert again == manifest and again.cells["pytorch_fp32_bs1"].status == "pending"
    (tmp_path / runs.MANIFEST).write_text('{"options": {}, "cells": {"x": {"status": 3}}}')
    with pytest.raises(UserError, match="not a sweep manifest"):
        runs.read_manifest(tmp_path)


# ---- layout: one resolver, and analysis that knows none of it --------------------------------


def test_trace_package_imports_nothing_above_it_but_errors_and_file_helpers():
    allowed = {"profiler.errors", "profiler.fsutil"}
    for path in sorted((ROOT / "profiler" / "trace").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level:
                target = "profiler.trace" if node.level == 1 else "profiler"
                names = [
                    f"{target}.{node.module}" if node.module else f"{target}.{a.name}"
                    for a in node.names
                ]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            for name in names:
                if name.startswith("profiler.") and not name.startswith("profiler.trace"):
                    assert name in allowed, f"{path.name} imports {name}"


def test_one_resolver_for_names_cells_folders_and_files(tmp_path, monkeypatch):
    monkeypatch.chdir(H200)
    by_name = runs.resolve_target("ttrt_fp16_bs8")
    assert by_name.result is not None and RunAnalysis(by_name).context.precision == "fp16"
    assert runs.resolve_target("runs/ttrt_fp16_bs8").path == by_name.path
    by_tb = runs.resolve_target("tb_logs/ttrt_fp16_bs8")
    assert by_tb.path.resolve() == by_name.path.resolve() and by_tb.result is None
    assert runs.resolve_target(str(by_name.path)).traces == [by_name.path]
    assert runs.traces_of("ttrt_fp16_bs8") == by_name.traces
    with pytest.raises(UserError, match="no such file, folder or run: nope"):
        runs.resolve_target("nope")
    # a sweep's cell: <sweep>/<cell> under runs/, and the sweep folder itself
    sweep = tmp_path / "runs" / "s"
    (sweep / "pytorch_fp16_bs8").mkdir(parents=True)
    data = json.loads((H200 / "runs" / "pytorch_fp16_bs8" / "result.json").read_text())
    data["trace"]["files"] = [str(H200 / f) for f in data["trace"]["files"]]
    (sweep / "pytorch_fp16_bs8" / "result.json").write_text(json.dumps(data))
    (sweep / "sweep.json").write_text('{"options": {}, "cells": {}}')
    cell = runs.resolve_target("s/pytorch_fp16_bs8", root=tmp_path)
    assert cell.result.run_name == "pytorch_fp16_bs8"
    assert runs.find_sweep("s", root=tmp_path) == sweep
    assert runs.find_sweep(str(sweep / "sweep.json")) == sweep


# ---- runs that never replace what they are not ------------------------------------------------


def test_default_name_has_the_model_unless_it_is_the_default_one():
    from profiler.runs.config import RunConfig

    assert RunConfig(batch_size=8).run_name == "pytorch_fp32_bs8"
    assert RunConfig(batch_size=8, model="resnet18").run_name == "pytorch_fp32_bs8_resnet18"
    assert RunConfig(model="tests.tiny_models:conv_net").run_name == "pytorch_fp32_bs8_conv_net"
    assert RunConfig(model="resnet18", name="x").run_name == "pytorch_fp32_bs8_x"


def _one_line(done, *fragments):
    assert done.code == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert lines[-1].startswith("error: ") and "Traceback" not in done.stderr, done.stderr
    for fragment in fragments:
        assert fragment in lines[-1], lines[-1]


def test_another_model_never_silently_replaces_a_run(cli):
    """D27: a run of another model (or image size) under the same name is refused; --replace
    replaces it; the same identity again replaces it as before."""
    assert cli("run", *TINY, "--name", "x").code == 0
    result = Path("runs/pytorch_fp32_bs2_x/result.json")
    before = result.read_bytes()
    _one_line(
        cli("run", *TINY, "--name", "x", "--image-size", "32"),
        "runs/pytorch_fp32_bs2_x holds another run",
        "image size 224 (now 32)",
        "--replace",
    )
    _one_line(
        cli("run", *TINY[2:], "--model", "tests.tiny_models:oom_above_2", "--name", "x"),
        "model tests.tiny_models:conv_net (now tests.tiny_models:oom_above_2)",
    )
    assert result.read_bytes() == before
    assert cli("run", *TINY, "--name", "x", "--image-size", "32", "--replace").code == 0
    assert runs.read_result(result).config.image_size == 32
    assert cli("run", *TINY, "--name", "x", "--image-size", "32").code == 0  # same identity


def test_a_run_never_replaces_a_sweep(cli):
    """D1: a sweep folder named like a run is refused, and nothing in it changes."""
    sweep = Path("runs/pytorch_fp32_bs2_x")
    sweep.mkdir(parents=True)
    (sweep / "sweep.json").write_text('{"options": {}, "cells": {}}')
    _one_line(cli("run", *TINY, "--name", "x"), "is a sweep", "--name")
    assert sorted(p.name for p in sweep.iterdir()) == ["sweep.json"]
    assert not Path("tb_logs").exists()


def test_a_folder_that_is_not_a_run_needs_replace(cli):
    folder = Path("runs/pytorch_fp32_bs2_x")
    folder.mkdir(parents=True)
    (folder / "notes.txt").write_text("mine")
    _one_line(cli("run", *TINY, "--name", "x"), "no readable result.json", "--replace")
    assert (folder / "notes.txt").read_text() == "mine"


def test_runs_dir_and_tb_dir_must_differ(cli):
    """D2: both folders renamed onto out/<run> would delete the trace."""
    _one_line(
        cli("run", *TINY, "--runs-dir", "out", "--tb-dir", "./out/"),
        "--runs-dir and --tb-dir are the same folder",
    )
    assert not Path("out").exists()
    _one_line(
        cli(
            "sweep",
            "--backends",
            "pytorch_fp32",
            "--bs",
            "1",
            *TINY[:2],
            "--runs-dir",
            "out",
            "--tb-dir",
            "out",
        ),
        "--runs-dir and --tb-dir",
    )
    assert not Path("out").exists()


def test_files_and_folders_follow_the_umask(cli):
    previous = os.umask(0o022)
    try:
        assert cli("run", *TINY).code == 0
    finally:
        os.umask(previous)
    run, tb = Path("runs/pytorch_fp32_bs2_conv_net"), Path("tb_logs/pytorch_fp32_bs2_conv_net")
    for folder in (run, tb):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o755, folder
    for name in ("result.json", "latency.csv"):
        assert stat.S_IMODE((run / name).stat().st_mode) == 0o644, name


# ---- what killed or unfinished writers leave is never a run (issue 15, D6) -------------------


def _leftovers_beside_a_run(tmp_path: Path) -> Path:
    """runs/ and tb_logs/ holding only leftovers: a staging folder with a whole trace, a
    replaced run on its way out (with its result.json), a killed sweep's staging and lock files."""
    trace = next((H200 / "tb_logs" / "pytorch_fp16_bs8").glob("*.pt.trace.json.gz"))
    for folder in (
        tmp_path / "tb_logs" / ".a_bs1.partial-x1y2",
        tmp_path / "tb_logs" / ".b_bs1.old-99",
    ):
        folder.mkdir(parents=True)
        (folder / trace.name).write_bytes(trace.read_bytes())
    old_run = tmp_path / "runs" / ".b_bs1.old-99"
    old_run.mkdir(parents=True)
    (old_run / "result.json").write_bytes(
        (H200 / "runs" / "pytorch_fp16_bs8" / "result.json").read_bytes()
    )
    sweep = tmp_path / "runs" / ".sw.partial-abc"
    sweep.mkdir()
    (sweep / "sweep.json").write_text('{"cells": {}, "options": {}}')
    (tmp_path / "runs" / ".b_bs1.lock").write_text("123 run\n")
    return tmp_path


def test_leftovers_are_never_traces_runs_or_sweeps(tmp_path):
    root = _leftovers_beside_a_run(tmp_path)
    assert runs.traces_in_folder(root / "tb_logs") == []
    with pytest.raises(UserError, match="no trace files"):
        runs.resolve_target(str(root / "tb_logs"), root)
    for name in (".b_bs1.old-99", ".a_bs1.partial-x1y2", ".b_bs1.lock"):
        with pytest.raises(UserError, match="staging folder or lock of an unfinished run"):
            runs.resolve_target(name, root)
    with pytest.raises(UserError, match="not a run"):
        runs.traces_of(str(root / "tb_logs" / ".a_bs1.partial-x1y2"), root)
    assert runs.find_sweep(".sw.partial-abc", root) is None
    assert runs.find_sweep(root / "runs" / ".sw.partial-abc" / "sweep.json", root) is None
    assert not runs.is_leftover(Path("pytorch_fp32_bs1")) and runs.is_leftover(Path(".x.lock"))


def test_a_skipped_check_keeps_its_reason_in_result_json(tmp_path):
    result = runs.read_result(H200 / "runs" / "pytorch_fp16_bs8")
    import msgspec

    skipped = msgspec.structs.replace(
        result,
        numerics=runs.Numerics(
            skipped="reference did not fit", reason="CUDA out of memory in the FP32 eager reference"
        ),
    )
    runs.write_result(tmp_path, skipped)
    data = json.loads((tmp_path / "result.json").read_text())
    assert data["numerics"] == {
        "skipped": "reference did not fit",
        "reason": "CUDA out of memory in the FP32 eager reference",
    }
    assert runs.read_result(tmp_path).numerics.reason.startswith("CUDA out of memory")


# ---- the cache folder: $INFER_PROFILER_CACHE, else the user's cache (XDG) -------------------


def test_cache_folder_follows_xdg_and_the_override_wins(tmp_path, monkeypatch):
    from profiler.runs import layout

    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("INFER_PROFILER_CACHE", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    # unset: where earlier versions kept it
    assert layout.cache_dir() == home / ".cache" / "infer-profiler" / "engines"
    monkeypatch.setenv("XDG_CACHE_HOME", "")
    assert layout.cache_dir() == home / ".cache" / "infer-profiler" / "engines"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/cache")  # the spec: ignored
    assert layout.cache_dir() == home / ".cache" / "infer-profiler" / "engines"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert layout.cache_dir() == tmp_path / "xdg" / "infer-profiler" / "engines"
    assert layout.peaks_dir() == tmp_path / "xdg" / "infer-profiler" / "peaks"
    assert layout.noise_dir() == tmp_path / "xdg" / "infer-profiler" / "noise"
    monkeypatch.setenv("INFER_PROFILER_CACHE", str(tmp_path / "mine"))  # the override wins
    assert layout.cache_dir() == tmp_path / "mine"
    assert layout.peaks_dir() == tmp_path / "peaks"


def test_a_run_caches_under_xdg_cache_home(tmp_path):
    """A CPU run (no INFER_PROFILER_CACHE) keeps what it caches (here the bytecode, as where
    PYTHONDONTWRITEBYTECODE is set) under $XDG_CACHE_HOME; with -q it prints its results only
    (one real run for both: tests/test_verbosity.py has the rest)."""
    import os
    import subprocess
    import sys

    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("INFER_PROFILER_CACHE", "PYTHONPATH", "PYTHONPYCACHEPREFIX")
    }
    env.update(
        XDG_CACHE_HOME=str(tmp_path / "xdg"),
        HOME=str(tmp_path / "home"),
        PYTHONPATH=str(ROOT),
        PYTHONDONTWRITEBYTECODE="1",
    )
    kept = tmp_path / "xdg" / "infer-profiler" / "engines" / "pycache"
    link_kept_bytecode(kept)  # all but torch.nn.modules': the run writes those
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "profile.py"),
            "run",
            "--model",
            "tests.tiny_models:conv_net",
            "--bs",
            "1",
            "--iters",
            "2",
            "--timed-warmup",
            "0",
            "--active",
            "1",
            "--image-size",
            "16",
            "-q",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert kept.is_dir() and any(kept.rglob("torch/nn/modules/*.pyc"))
    assert not (tmp_path / "home" / ".cache").exists()
    # -q: results only (no phase lines, no progress, no next: hints)
    assert done.stderr == ""
    assert "p50 ms" in done.stdout and "results:" in done.stdout
    assert "next:" not in done.stdout
