"""The figures leave the analysis as typed records (profiler.analysis.records), the views read
their attributes, --json prints the same records, and docs/schema/ describes every field of
them: a program reading `compare --json`, `summarize --json`, `sweep --json`, `advise --json`
or `peaks --json` decodes them with the published types. A sweep's table is built in one pass
from one typed record per cell. Committed runs only; nothing is timed."""

import json
import subprocess
import sys

import msgspec

from profiler.analysis.benchmark import PHASE_COLUMNS
from profiler.analysis.records import (
    AdviceRecord,
    BenchmarkCell,
    CompareTimed,
    Explanation,
    GpuStateFigures,
    Headline,
    PlannedAdvice,
    RooflineFigures,
    plain,
)
from profiler.analysis.run_analysis import Comparison, RunAnalysis
from profiler.analysis.sweep_analysis import SweepAnalysis
from profiler.runs.gpu_record import GpuState
from profiler.runs.manifest import axis_options

from .conftest import FIXTURES, ROOT

RUNS = FIXTURES / "h200" / "runs"
SESSION = FIXTURES / "h100_sweep" / "runs" / "gpu_sweep"


def _schema(kind: str) -> dict:
    return json.loads((ROOT / "docs" / "schema" / f"{kind}.json").read_text())


def _free_form(schema: dict, name: str, seen: set[str] | None = None) -> list[str]:
    """The objects reachable from one $defs entry whose fields the schema does not name."""
    seen = set() if seen is None else seen
    if name in seen:
        return []
    seen.add(name)
    found = []

    def walk(node, path):
        if isinstance(node, dict):
            ref = node.get("$ref")
            if ref:
                found.extend(_free_form(schema, ref.rsplit("/", 1)[1], seen))
            elif node.get("type") == "object" and not {"properties", "additionalProperties"} & set(
                node
            ):  # a dict[str, Any]: neither its keys nor its values named
                found.append(path)
            for key, value in node.items():
                walk(value, f"{path}/{key}")
        elif isinstance(node, list):
            for value in node:
                walk(value, path)

    walk(schema["$defs"][name], name)
    return found


def test_the_compare_schema_names_every_field_of_the_timed_headline_and_the_explanation():
    schema = _schema("compare")
    assert _free_form(schema, "CompareTimed") == []
    assert _free_form(schema, "Explanation") == []
    defs = schema["$defs"]
    timed = defs["CompareTimed"]["properties"]
    for key in (
        "speedup_x",
        "gpu_speedup_x",
        "verdict",
        "gpu_verdict",
        "verdicts",
        "noise_a",
        "processes_a",
    ):
        assert key in timed, key
    verdict = defs["Verdict"]["properties"]
    assert verdict["verdict"]["enum"] == ["faster", "same", "slower", "undecided"]
    assert {"ratio", "low", "high", "same_low", "same_high", "figure"} <= set(verdict)
    assert set(defs["ProcessFigures"]["properties"]["bound"]["anyOf"][0]["enum"]) == {
        "launch-bound",
        "near the launch bound",
        "GPU-bound",
    }
    assert {"latency", "gpu_time", "enqueue"} <= set(defs["ProcessFigures"]["properties"])
    assert {"cv", "warnings", "bimodal_d"} <= set(defs["WindowNoise"]["properties"])


def test_the_summarize_schema_names_every_field_of_the_headline():
    assert _free_form(_schema("summarize"), "Headline") == []


def test_compare_records_read_back_from_their_json_as_the_same_records():
    both = Comparison(
        RunAnalysis(RUNS / "pytorch_fp16_bs8"), RunAnalysis(RUNS / "ttrt_fp16_bs8"), "A", "B"
    )
    timed, why = both.timed, both.explanation
    assert isinstance(timed, CompareTimed) and isinstance(why, Explanation)
    assert timed.verdict.speedup == timed.speedup_x
    # the committed runs predate recorded noise: read back from latency.csv, timed once
    assert timed.noise_a.repeat_runs is msgspec.UNSET
    assert "repeat_runs" not in plain(timed)["noise_a"]
    text = json.dumps(plain(timed))
    assert msgspec.json.decode(text, type=CompareTimed) == timed
    assert msgspec.convert(plain(why), Explanation) == why


def test_compare_json_reads_back_as_its_document_with_typed_rows(cli):
    """compare --json is the typed figures: it decodes into the published Compare document, each
    table a list of its rows, each of the largest changes the row of the level the runs differ at
    (eager against TensorRT: launching operators; two CPU runs: CPU operators)."""
    from profiler.cli.documents import Compare
    from profiler.trace.diff_rows import CpuOperatorChange, KernelRow, OperatorChange

    done = cli("compare", str(RUNS / "pytorch_fp16_bs8"), str(RUNS / "ttrt_fp16_bs8"), "--json")
    assert done.code == 0, done.stderr
    found = msgspec.json.decode(done.stdout, type=Compare)
    assert found.faster_in_b and all(isinstance(r, OperatorChange) for r in found.faster_in_b)
    assert isinstance(found.kernels[0], KernelRow) and found.totals["kernels"] == 50
    both = Comparison(
        RunAnalysis(RUNS / "pytorch_fp16_bs8"), RunAnalysis(RUNS / "ttrt_fp16_bs8"), "A", "B"
    )
    assert both.figures(top=3).kernels == both.figures().kernels[:3]
    done = cli(  # two llama-tiny runs on a CPU, bs 1 and bs 2, with their traces
        "compare",
        str(FIXTURES / "memory_history_cpu" / "runs" / "pytorch_fp32_bs1_cpu_mh"),
        str(FIXTURES / "modules_cpu" / "runs" / "pytorch_fp32_bs2_modules"),
        "--json",
    )
    assert done.code == 0, done.stderr
    found = msgspec.json.decode(done.stdout, type=Compare)
    assert found.slower_in_b and all(isinstance(r, CpuOperatorChange) for r in found.slower_in_b)
    assert found.explanation is None and found.kernels == []


def test_a_runs_headline_reads_back_with_its_gpu_state():
    from profiler.analysis.headline import gpu_state_of
    from profiler.report.sentences import gpu_state_line
    from profiler.runs.result import read_result

    headline = RunAnalysis(SESSION / "ttrt_fp16_bs8").headline
    result = read_result(SESSION / "ttrt_fp16_bs8" / "result.json")
    assert isinstance(headline, Headline)
    assert headline.noise.repeat_runs is not msgspec.UNSET  # recorded in result.json
    assert msgspec.convert(plain(headline), Headline) == headline
    # the state is data; the view words it, the same from the figures as from the record
    said = gpu_state_line(headline.gpu_state)
    assert said.startswith("GPU state") and said == gpu_state_line(gpu_state_of(result))


def test_the_gpu_state_figures_carry_every_field_of_the_record_first():
    fields = GpuState.__struct_fields__
    assert GpuStateFigures.__struct_fields__[: len(fields)] == fields
    assert GpuStateFigures.__struct_fields__[len(fields) :] == (
        "sm_clock_mhz",
        "throttle_reasons",
    )


def test_the_types_of_the_documents_load_without_numpy_or_pandas():
    """The command line describes its documents before any analysis is loaded."""
    code = (
        "import sys; import profiler.cli.documents; "
        "assert not {'numpy', 'pandas'} & set(sys.modules), 'loaded'"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]


def test_a_sweeps_table_and_gpu_offsets_read_each_cell_once(tmp_path, monkeypatch):
    """`sweep` writes benchmark.csv and its GPU offsets from one read of every cell
    (profiler.analysis.benchmark.cell_analyses), and the table is the one read alone gives."""
    import shutil
    from types import SimpleNamespace

    from profiler.analysis import benchmark
    from profiler.commands.sweep import write_tables
    from profiler.runs.manifest import read_manifest

    folder = tmp_path / "gpu_sweep"
    shutil.copytree(SESSION, folder)
    alone = benchmark.benchmark_table(folder, read_manifest(folder))
    reads = []
    real = benchmark.try_read_result
    monkeypatch.setattr(benchmark, "try_read_result", lambda path: reads.append(path) or real(path))
    sweep = write_tables(SimpleNamespace(sweep_dir=folder))
    assert len(reads) == len(set(reads)) == len(sweep.manifest.cells)
    assert sweep.benchmark.equals(alone)
    assert sweep.offsets == benchmark.sweep_gpu_offsets(folder, sweep.manifest)


def test_the_insight_and_advice_of_summarize_and_advise_read_back_as_their_records(cli):
    """summarize's roofline and advice and advise's advice decode with the published types
    (a key they do not name is refused), and the summarize schema names every roofline field."""
    run = str(SESSION / "pytorch_fp16_bs8")
    done = cli("summarize", run, "--json")
    assert done.code == 0, done.stderr
    insight = json.loads(done.stdout)["insight"]
    roofline = msgspec.convert(insight["roofline"], RooflineFigures)
    assert roofline.bound == "compute" and plain(roofline) == insight["roofline"]
    advice = msgspec.convert(insight["advice"], list[AdviceRecord])
    assert advice and plain(advice) == insight["advice"]
    done = cli("advise", run, "--json")
    assert done.code == 0, done.stderr
    planned = msgspec.convert(json.loads(done.stdout)["advice"], list[PlannedAdvice])
    assert any(a.measured for a in planned)  # the sweep's other cells at the same batch size
    assert _free_form(_schema("summarize"), "RooflineFigures") == []


def test_a_roofline_figure_that_is_not_finite_is_null():
    from profiler.analysis.roofline import run_roofline

    inputs = {"flops_per_batch": 1e9, "min_bytes_per_batch": 0}
    roofline = run_roofline(inputs, 2.0, None, "fp16")
    assert roofline.intensity != roofline.intensity  # no bytes: NaN FLOPs per byte
    assert roofline.record().intensity is None and roofline.to_dict()["intensity"] is None
    assert json.loads(json.dumps(roofline.to_dict())) == roofline.to_dict()


def test_summarize_phases_read_back_as_their_record(cli):
    """A generation trace's phase tables decode with the published type (PhaseTables)."""
    from profiler.cli.documents import PhaseTables

    run = FIXTURES / "h100_generate" / "runs" / "ttrt_fp16_bs1_fixture"
    done = cli("summarize", str(run), "--json")
    assert done.code == 0, done.stderr
    phases = msgspec.convert(json.loads(done.stdout)["phases"], PhaseTables)
    assert phases.has_kernels and {"encode", "decode"} <= {r.phase for r in phases.phases}


def test_a_sweeps_table_is_built_in_one_pass_from_one_typed_record_per_cell(monkeypatch):
    """Each cell's record is built once (cell_figures: its noise, memory, compile time and
    roofline read once), its verdicts against the baseline's cell taken once, and the frame
    the views slice is built from the typed rows alone: with the analysis made to fail, the
    rows give the frame benchmark_table gives."""
    from collections import Counter

    from profiler.analysis import benchmark
    from profiler.runs.manifest import read_manifest

    manifest = read_manifest(SESSION)
    alone = benchmark.benchmark_table(SESSION, manifest)
    built, entered = Counter(), Counter()
    real_figures = benchmark.cell_figures

    def counted_figures(manifest, analysed):
        built[analysed.name] += 1
        return real_figures(manifest, analysed)

    def counting(name):
        real = getattr(benchmark, name)
        return lambda *args, **kwargs: entered.update([name]) or real(*args, **kwargs)

    analysis = ("window_noise", "memory_figures", "compile_time", "roofline_of")
    monkeypatch.setattr(benchmark, "cell_figures", counted_figures)
    for name in (*analysis, "verdicts_between"):
        monkeypatch.setattr(benchmark, name, counting(name))
    rows = benchmark.benchmark_rows(SESSION, manifest)
    assert all(isinstance(row, BenchmarkCell) for row in rows)
    assert built == Counter(dict.fromkeys(manifest.cells, 1))
    finished = [row for row in rows if row.status == "ok"]
    assert [entered[name] for name in analysis] == [len(finished)] * len(analysis)
    judged = [row for row in finished if row.backend != manifest.baseline]
    assert entered["verdicts_between"] == len(judged) == 2

    def fail(*args, **kwargs):
        raise AssertionError("the frame is built from the rows alone")

    for name in (*analysis, "verdicts_between", "cell_figures", "try_read_result"):
        monkeypatch.setattr(benchmark, name, fail)
    assert benchmark.benchmark_frame(rows, manifest).equals(alone)


def test_a_sweeps_rows_carry_both_figures_speedups_intervals_and_verdicts():
    """SweepAnalysis.rows: each figure's speedup, its 95 % interval and its verdict, the
    classification and the noise, read as attributes; `sweep --json`'s cells decode back into
    the same records, and the schema names every field."""
    from profiler.report.benchmark_view import benchmark_json

    sweep = SweepAnalysis(FIXTURES / "h100x4_sweep" / "runs" / "g4")
    cell = {(row.backend, row.bs): row for row in sweep.rows}
    base, inductor = cell[("pytorch_fp32", 8)], cell[("inductor_fp16", 8)]
    assert (base.speedup, base.verdict, base.gpu_verdict) == (1.0, "baseline", "baseline")
    # eager FP32 bs 8 on an H100: the host paced 3 of its 6 processes (latency 1.09 x GPU time)
    assert (base.bound, base.processes, base.gpus) == ("near the launch bound", 6, "0;1;2;3")
    assert (cell[("pytorch_fp32", 16)].bound, cell[("pytorch_fp16", 8)].bound) == (
        "GPU-bound",
        "launch-bound",
    )
    assert base.noise == "noisy; bimodal; drifting" and base.cv_pct > 10
    assert (inductor.verdict, inductor.gpu_verdict) == ("faster", "faster")
    assert inductor.speedup_low < inductor.speedup < inductor.speedup_high
    assert inductor.gpu_speedup_low < inductor.gpu_speedup < inductor.gpu_speedup_high
    frame = sweep.benchmark.set_index(["backend", "bs"])
    assert inductor.gpu_speedup == frame.loc[("inductor_fp16", 8)]["gpu_speedup"]
    cells = benchmark_json(sweep.rows, sweep.manifest, sweep.folder)["cells"]
    assert msgspec.convert(json.loads(json.dumps(cells)), list[BenchmarkCell]) == sweep.rows
    assert _free_form(_schema("benchmark"), "Benchmark") == []
    fields = list(BenchmarkCell.__struct_fields__)
    assert fields[4:9] == list(axis_options()) and fields[-len(PHASE_COLUMNS) :] == PHASE_COLUMNS


def test_advise_reads_back_as_its_records_and_the_judgement_is_data(cli):
    """`advise --json` decodes into the published document (its advice, plan, trial, rows);
    a row's judgement is data (Judgement) the views word, and trial.json is a TrialRecord."""
    from profiler.analysis.records import Judgement, TrialCellRecord, TrialRecord, TrialRow
    from profiler.analysis.trial import baseline_row, trial_rows
    from profiler.cli.documents import Advise
    from profiler.report.trial_view import judgement_text

    done = cli("advise", str(SESSION / "pytorch_fp16_bs8"), "--json")
    assert done.code == 0, done.stderr
    document = msgspec.convert(json.loads(done.stdout), Advise)
    assert document.plan and document.plan[0].changes == {"cuda_graphs": True}
    assert document.trial is None and document.rows is None
    baseline = TrialCellRecord(
        label="baseline", changes={}, rules=[], folder="pytorch_fp16_bs8", status="ok"
    )
    ttrt = TrialCellRecord(
        label="backend ttrt_fp16",
        changes={"backend": "ttrt_fp16"},
        rules=["launch-bound"],
        folder="ttrt_fp16_bs8",
        status="ok",
    )
    trial = TrialRecord(folder="runs/advise_x", cells=[baseline, ttrt])
    [row] = trial_rows(trial, SESSION, {"launch-bound": 2.0})
    assert isinstance(row, TrialRow) and isinstance(row.judgement, Judgement)
    assert (row.judgement.speedup, row.judgement.low) == (row.speedup, row.low)
    assert row.judgement.projected == 2.0 and row.judgement.projection == "estimate"
    assert judgement_text(row.judgement).startswith("projected estimate 2.00x, measured ")
    data = {
        **json.loads(done.stdout),
        "trial": plain(trial),
        "baseline": plain(baseline_row(trial, SESSION)),
        "rows": plain([row]),
    }
    assert msgspec.convert(json.loads(json.dumps(data)), Advise).rows == [row]
    assert _free_form(_schema("advise"), "Advise") == []


def test_the_peaks_document_and_the_backend_notes_are_typed():
    """A committed `peaks` measurement (H100) decodes into the published peaks document, read
    by attribute; result.json's backend notes name their facts in the schema."""
    from profiler.cli.documents import Peaks, schema_id

    data = json.loads((ROOT / "docs" / "gpu" / "h100" / "peaks.json").read_text())
    peaks = msgspec.convert({"$schema": schema_id("peaks"), **data}, Peaks)
    assert peaks.machine.device == "NVIDIA H100 80GB HBM3" and peaks.method.sizes.matmul_n == 8192
    assert peaks.matmul_detail["fp16"].tflops == peaks.matmul_tflops["fp16"] > 700
    assert peaks.copy.gb_per_s > 2000
    assert _free_form(_schema("peaks"), "Peaks") == []
    notes = _schema("result")["$defs"]["BackendNotes"]["properties"]
    assert {"compile_s", "load_s", "warnings", "engine_memory"} <= set(notes)
