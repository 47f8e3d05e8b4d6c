"""Two CPU runs are first-class runs: `compare` and `report` show their CPU operators matched by
name (self and total CPU time, calls, gains and losses) and no GPU table, the CPU's measured
peaks give their roofline, and the views of a CPU run hold no GPU-only column or sentence."""

import json
import re

import msgspec
import pytest

from tests.conftest import ROOT, invoke_in
from tests.test_cpu_honest import TINY

A, B = "runs/pytorch_fp32_bs2_conv_net", "runs/torchscript_fp32_bs2_conv_net"
#: what `compare` of two GPU runs prints and two CPU runs must not
GPU_TABLES = (
    "Kernel time by category",
    "Kernels only in",
    "Kernel time by launching operator",
    "Top 0",
    "(top",
    "no GPU kernels",
    "GPU state",
    "GPU time",
    "TC-kernel",
)


@pytest.fixture(scope="module")
def cpu_runs(tmp_path_factory):
    """Two tiny CPU runs of one model (eager and TorchScript), in this process: their folder."""
    where = tmp_path_factory.mktemp("cpu2")
    for backend in ("pytorch_fp32", "torchscript_fp32"):
        done = invoke_in(where, "run", "--backend", backend, "--bs", "2", *TINY)
        assert done.code == 0, done.stderr
    return where


def test_compare_of_two_cpu_runs_shows_the_cpu_operator_diff_and_no_gpu_table(cpu_runs, cli):
    done = cli("compare", str(cpu_runs / A), str(cpu_runs / B), "--view", "full")
    assert done.code == 0, done.stderr
    out = done.stdout
    for gpu_only in GPU_TABLES:
        assert gpu_only not in out, gpu_only
    assert "CPU operators by self CPU time, per step" in out
    assert "CPU operator self time per step" in out  # the overview's CPU row
    # eager and TorchScript run other operators: gains and losses both have rows
    assert re.search(r"Top [1-9]\d* gains: CPU operators faster in B \(self time\)", out)
    assert re.search(r"Top [1-9]\d* losses: CPU operators slower in B \(self time\)", out)
    assert "aten::" in out


def test_compare_json_and_csv_of_cpu_runs_carry_the_operator_diff(cpu_runs, cli, tmp_path):
    done = cli(
        "compare", str(cpu_runs / A), str(cpu_runs / B), "--json", "--out", str(tmp_path / "csv")
    )
    assert done.code == 0, done.stderr
    doc = json.loads(done.stdout)
    ops = doc["cpu_operators"]
    assert ops and {
        "operator",
        "calls_a",
        "calls_b",
        "us_a",
        "us_b",
        "delta_us",
        "total_a_us",
        "total_b_us",
    } <= set(ops[0])
    assert doc["faster_in_b"] and doc["slower_in_b"]
    assert all(r["delta_us"] < 0 for r in doc["faster_in_b"])
    assert {"operator", "total_a_us"} <= set(doc["slower_in_b"][0])
    assert doc["explanation"] is None  # no kernel-level "why" for two CPU runs
    assert (tmp_path / "csv" / "cpu_operators.csv").is_file()


def test_report_of_cpu_runs_has_the_operator_diff_and_no_gpu_section(cpu_runs, tmp_path):
    from profiler.commands.report import run

    page = run(
        str(cpu_runs / A), str(cpu_runs / B), tmp_path / "cmp.html", peaks_dir=tmp_path / "none"
    )
    text = re.sub(r"src='data:[^']*'", "", page.read_text())
    sections = re.findall(r"<h2[^>]*>(.*?)</h2>", text)
    assert "CPU operators by self CPU time (µs per profiled step)" in sections
    assert any(s.startswith("CPU operator diff: top CPU operators faster") for s in sections)
    assert any(s.startswith("CPU operator diff: top CPU operators slower") for s in sections)
    assert "A: CPU operators by self CPU time" in sections
    assert "Roofline chart" not in sections  # no ceilings: no roofline without a roof
    assert "GPU" not in text and "kernel" not in text.lower(), [
        text[m.start() - 80 : m.end() + 40] for m in re.finditer("GPU|kernel", text)
    ]
    one = run(str(cpu_runs / A), None, tmp_path / "one.html", peaks_dir=tmp_path / "none")
    text = re.sub(r"src='data:[^']*'", "", one.read_text())
    assert "GPU" not in text and "(none)" not in text
    assert "host load (timed window)" in text


def _cpu_peaks(folder, fp32=0.19, gbs=12.0, device="CPU x86_64"):
    """A peaks cache as `peaks` writes it on a CPU (figures given here, not measured)."""
    folder.mkdir(parents=True, exist_ok=True)
    data = {
        "schema": 2,
        "source": "measured",
        "machine": {"device": device, "driver": None, "torch": "x", "compute_capability": None},
        "matmul_tflops": {
            "fp32": fp32,
            "tf32": None,
            "fp16": None,
            "bf16": None,
            "fp8": None,
            "int8": None,
        },
        "matmul_detail": {},
        "copy": {"gb_per_s": gbs, "bytes": 1, "median_s": 1.0},
    }
    (folder / f"{device.replace(' ', '-')}.json").write_text(json.dumps(data))


def test_a_cpu_runs_roofline_meets_the_cpus_cached_peaks(cpu_runs, cli, tmp_path, monkeypatch):
    from profiler.analysis.roofline import cached_ceilings, roofline_of
    from profiler.runs.result import read_result

    monkeypatch.setenv("INFER_PROFILER_CACHE", str(tmp_path / "cache" / "engines"))
    before = cli("summarize", str(cpu_runs / A))
    assert "no ceilings for this CPU: `profile.py peaks` measures them" in before.stdout
    _cpu_peaks(tmp_path / "cache" / "peaks")
    _cpu_peaks(tmp_path / "cache" / "peaks", fp32=67.0, gbs=3350.0, device="NVIDIA H100")
    done = cli("summarize", str(cpu_runs / A))
    assert done.code == 0, done.stderr
    roofline = next(line for line in done.stdout.splitlines() if "Roofline" in line)
    assert "measured (" in roofline and "CPU-x86_64.json" in done.stdout
    assert "of fp32 peak" in done.stdout and "none drawn" not in done.stdout
    result = read_result(cpu_runs / A)
    ceilings = cached_ceilings(result, tmp_path / "cache" / "peaks")
    assert ceilings.matmul_tflops["fp32"] == 0.19 and ceilings.bandwidth_gbs == 12.0
    assert "torch.mm on the CPU" in ceilings.sources["fp32"]
    assert "cuBLAS" not in " ".join(ceilings.sources.values())
    r = roofline_of(result, tmp_path / "cache" / "peaks")
    assert r.peak_tflops == 0.19 and r.bound in ("memory", "compute")
    # a CPU run recorded on another machine does not meet this machine's CPU
    elsewhere = msgspec.structs.replace(
        result, environment=msgspec.structs.replace(result.environment, hostname="another-host")
    )
    assert cached_ceilings(elsewhere, tmp_path / "cache" / "peaks") is None


def test_the_cpu_report_draws_the_roofline_against_the_cpu_peaks(cpu_runs, tmp_path):
    pytest.importorskip("matplotlib")
    from profiler.commands.report import run

    _cpu_peaks(tmp_path / "peaks")
    page = run(str(cpu_runs / A), None, tmp_path / "one.html", peaks_dir=tmp_path / "peaks")
    text = page.read_text()
    assert "Roofline chart" in text
    assert re.search(r"achieved compute</th><td>[\d.,]+ TFLOP/s = [\d.]+ % of 0\.190", text)


def test_advise_try_on_a_cpu_shows_no_kernel_columns_or_gpu_sentence():
    from rich.console import Console

    from profiler.analysis.experiments import Plan, _bigger_batches
    from profiler.analysis.records import TrialRecord
    from profiler.analysis.trial import BaselineRow, KernelChange, TrialRow
    from profiler.report.trial_view import print_trial, trial_html

    rows = [
        TrialRow(
            label="--bs 4",
            changes={"batch_size": 4},
            rules=["batch-headroom"],
            status="ok",
            p50_ms=3.0,
            processes=2,
            speedup=1.4,
            low=1.2,
            high=1.6,
            verdict="faster",
            figure="per sample",
            kernels=KernelChange(launches_per_step=(0.0, 0.0), idle_us_per_step=(None, None)),
        )
    ]
    base = BaselineRow(status="ok", reason=None, p50_ms=4.0, processes=2)
    trial = TrialRecord(folder="runs/x/trial", wall_s=10.0, rounds_s=8.0, processes=2)
    console = Console(record=True, width=160)
    print_trial(rows, base, trial, Plan([], {}), console)
    out = console.export_text()
    for gpu_only in ("launches/step", "idle µs/step", "kernels gone", "GPU"):
        assert gpu_only not in out, gpu_only
    page = trial_html("runs/x", [], Plan([], {}), rows, base, trial)
    assert "GPU" not in page and "kernels gone" not in page
    for _, _, why in _bigger_batches({"batch_size": 2, "backend": "pytorch_fp32"}):
        assert "GPU" not in why


def test_a_gpu_compare_keeps_its_kernel_tables():
    """The CPU operator diff replaces nothing in a compare of two GPU runs."""
    from profiler.trace.diff import diff
    from profiler.trace.summary import summarize

    h200 = ROOT / "tests" / "fixtures" / "h200" / "tb_logs"
    traces = [
        next((h200 / name).rglob("*.pt.trace.json*"))
        for name in ("pytorch_fp16_bs8", "ttrt_fp16_bs8")
    ]
    result = diff(summarize(traces[0]), summarize(traces[1]))
    assert not result.on_cpu and result.change_level == "operator"
    assert "kernel time per step" in set(result.overview["metric"])
    assert len(result.cpu_operators)  # computed, shown only in --json / --out


def test_summary_md_of_a_cpu_run_has_no_kernel_sections(cpu_runs, tmp_path):
    from profiler.report.export import export
    from profiler.trace.summary import summarize

    trace = next((cpu_runs / "tb_logs").rglob("*.pt.trace.json*"))
    export(summarize(trace), tmp_path)
    md = (tmp_path / "summary.md").read_text()
    assert "## CPU operators" in md
    for gpu_only in ("## Kernels", "## Kernel time by category", "Tensor Core"):
        assert gpu_only not in md, gpu_only


def test_advise_on_a_cpu_run_suggests_the_cpu_experiments(cpu_runs, cli):
    """`run`'s next: line names TorchScript; advise names it too, with Inductor, and the thread
    count as a lever without a run option (not "nothing to try")."""
    done = cli("advise", str(cpu_runs / A))
    assert done.code == 0, done.stderr
    out = " ".join(done.stdout.split())
    assert "nothing to try" not in out
    for shown in ("backend torchscript_fp32", "backend inductor_fp32", "OMP_NUM_THREADS"):
        assert shown in out, shown
    assert "cpu-threads: no experiment" in out


def test_the_cpu_experiments_for_a_conv_net_and_a_cpu_with_bf16(tmp_path):
    from profiler.analysis.advice import Evidence, advise
    from profiler.analysis.experiments import plan
    from profiler.analysis.insight import cpu_bf16

    config = {"backend": "pytorch_fp32", "batch_size": 1, "model": "resnet18"}
    on_cpu = Evidence(backend="pytorch_fp32", precision="fp32", on_cpu=True, cpu_bf16=True)
    labels = [e.label for e in plan(advise(on_cpu), config).experiments]
    assert set(labels) == {
        "backend torchscript_fp32",
        "backend inductor_fp32",
        "--memory-format channels_last",
        "backend pytorch_bf16",
    }
    without = Evidence(backend="pytorch_fp32", precision="fp32", on_cpu=True, cpu_bf16=False)
    labels = [e.label for e in plan(advise(without), config).experiments]
    assert "backend pytorch_bf16" not in labels
    # a GPU run gets none of them
    assert not advise(Evidence(backend="pytorch_fp32", precision="fp32"))
    flags = tmp_path / "cpuinfo"
    flags.write_text("processor\t: 0\nflags\t\t: fpu sse2 avx512f avx512_bf16\n")
    assert cpu_bf16(flags) is True
    flags.write_text("processor\t: 0\nflags\t\t: fpu sse2 avx2\n")
    assert cpu_bf16(flags) is False
    assert cpu_bf16(tmp_path / "none") is None
