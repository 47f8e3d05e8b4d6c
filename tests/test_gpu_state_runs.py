"""The GPU state of the timed window in a run's record and views: result.json with and without
it (runs recorded before it was), the headlines that print it, and compare's explanation of why
two runs differ (the same kernels at another clock, or other kernels), on the committed H100
sweep's real run folders."""

from __future__ import annotations

import json
import shutil

import jsonschema
import msgspec

from profiler import runs
from profiler.analysis.records import Explanation, GpuStateFigures
from profiler.report.sentences import difference_lines, explanation_line, gpu_state_line
from profiler.runs.gpu_record import GpuSample, GpuState
from tests.conftest import FIXTURES, ROOT

SWEEP = FIXTURES / "h100_sweep" / "runs" / "gpu_sweep"
EAGER_BS8 = SWEEP / "pytorch_fp16_bs8"


def sample(mhz: int, reasons=()) -> GpuSample:
    return GpuSample(
        sm_clock_mhz=mhz,
        temperature_c=50,
        power_w=300.0,
        throttle_mask=0,
        throttle_reasons=list(reasons),
    )


def state(mhz: int, reasons=()) -> GpuState:
    return GpuState(
        device="NVIDIA H100 80GB HBM3",
        max_sm_clock_mhz=1980,
        before=sample(mhz),
        after=sample(mhz, reasons),
        power_limited_ms=0.0,
        thermal_limited_ms=0.0,
        load_average=(0.5, 0.4, 0.3),
        cpus=16,
    )


def copy_run(folder, gpu: GpuState | None = None, run: str = "pytorch_fp16_bs8"):
    """A copy of a committed run folder (result.json naming the committed trace by its
    absolute path, latency.csv beside it), its GPU state set to ``gpu``."""
    source = SWEEP / run
    folder.mkdir(parents=True)
    shutil.copy(source / "latency.csv", folder / "latency.csv")
    data = json.loads((source / "result.json").read_text())
    data["trace"]["files"] = [
        str(FIXTURES / "h100_sweep" / name) for name in data["trace"]["files"]
    ]
    if gpu is not None:
        data["gpu_state"] = msgspec.to_builtins(gpu)
    (folder / "result.json").write_text(json.dumps(data, indent=2))
    return folder


def validate(kind: str, document: dict) -> dict:
    schema = json.loads((ROOT / "docs" / "schema" / f"{kind}.json").read_text())
    validator = jsonschema.Draft202012Validator(schema)
    errors = [e.message[:300] for e in validator.iter_errors(document)]
    assert not errors, errors
    return document


def json_of(done) -> dict:
    assert done.code == 0, done.stderr
    return json.loads(done.stdout)


def test_a_run_recorded_before_the_gpu_state_reads_and_writes_back_without_it():
    original = json.loads((EAGER_BS8 / "result.json").read_text())
    assert "gpu_state" not in original
    result = runs.read_result(EAGER_BS8)
    assert result.gpu_state is None
    assert "gpu_state" not in runs.result_to_dict(result)


def test_the_gpu_state_goes_into_result_json_and_back(tmp_path):
    recorded = msgspec.structs.replace(
        runs.read_result(EAGER_BS8), gpu_state=state(1755, ["sw_power_cap"])
    )
    written = runs.write_result(tmp_path, recorded)
    data = json.loads(written.read_text())
    assert list(data)[-1] == "gpu_state"  # appended: the keys before it keep their order
    assert data["gpu_state"]["before"]["sm_clock_mhz"] == 1755
    back = runs.read_result(written)
    assert back.gpu_state == recorded.gpu_state and back == recorded
    not_recorded = GpuState(not_recorded="no NVML", load_average=(1.0, 1.0, 1.0), cpus=2)
    written = runs.write_result(tmp_path, msgspec.structs.replace(recorded, gpu_state=not_recorded))
    assert runs.read_result(written).gpu_state == not_recorded


# ---- the headlines print it -----------------------------------------------------------------


def test_summarize_prints_the_gpu_state_line_and_its_json_headline_carries_it(cli, tmp_path):
    done = cli("summarize", str(EAGER_BS8), "--view", "overview")
    assert done.code == 0, done.stderr
    assert "GPU state: not recorded (run recorded before the GPU state was)" in done.stdout
    a = copy_run(tmp_path / "a", state(1755, ["sw_power_cap"]))
    data = validate("summarize", json_of(cli("summarize", str(a), "--json")))
    gpu = data["headline"]["gpu_state"]
    assert gpu["sm_clock_mhz"] == 1755 and gpu["throttle_reasons"] == ["sw_power_cap"]
    assert gpu["before"]["sm_clock_mhz"] == 1755 and gpu["not_recorded"] is None
    assert "line" not in gpu  # the view words the record
    said = gpu_state_line(msgspec.convert(gpu, GpuStateFigures))
    assert said.startswith("GPU state: NVIDIA H100 80GB HBM3, SM 1755 of 1980 MHz")
    assert "\n" not in said


def test_the_run_view_prints_one_line_when_nvml_is_absent():
    from rich.console import Console

    from profiler.report.run_view import print_result

    result = msgspec.structs.replace(
        runs.read_result(EAGER_BS8),
        gpu_state=GpuState(not_recorded="no NVML", load_average=(0.5, 0.5, 0.5), cpus=16),
    )
    console = Console(record=True, width=200)
    print_result(result, console)
    lines = [line for line in console.export_text().splitlines() if "GPU state" in line]
    assert lines == ["GPU state: not recorded (no NVML); host load 0.50 on 16 CPUs"]


# ---- compare says why two runs differ -------------------------------------------------------


def test_compare_of_two_runs_names_the_kernels_that_differ(cli):
    """Batch 1 against batch 8 on the H100: cuDNN and cuBLAS run other kernels; the line says
    so, names them, and puts it down to the configs, not to autotuning."""
    a, b = str(SWEEP / "pytorch_fp16_bs1"), str(SWEEP / "pytorch_fp16_bs8")
    done = cli("compare", a, b, "--top", "3", "--view", "full")
    assert done.code == 0, done.stderr
    why = [line for line in done.stdout.splitlines() if line.startswith("why B differs")]
    assert len(why) == 1 and why[0].startswith(
        "why B differs from A (kernels): different kernels (the runs differ in batch_size): B adds "
    )
    assert "GPU state A: not recorded (run recorded before the GPU state was)" in done.stdout
    data = validate("compare", json_of(cli("compare", a, b, "--json")))
    e = data["explanation"]
    assert e["cause"] == "kernels" and e["differs_in"] == ["batch_size"]
    assert e["same_config"] is False
    assert e["added"] and e["removed"]
    said = explanation_line(msgspec.convert(e, Explanation))  # the view's line, from the data
    assert e["added"][0]["name"] in said and said.startswith("different kernels (the runs")
    assert all(0 < k["share"] <= 1 for k in e["added"] + e["removed"])
    assert said.endswith("; SM clock not recorded for A and B")
    assert e["clock_a_mhz"] is None and e["latency_ratio"] > 0
    # a side that is a bare trace: no run, no explanation (the key stays, null)
    data = validate(
        "compare",
        json_of(
            cli(
                "compare",
                a,
                str(FIXTURES / "h100_sweep" / "tb_logs" / "gpu_sweep" / "pytorch_fp16_bs8"),
                "--json",
            )
        ),
    )
    assert data["explanation"] is None


def test_the_same_kernels_at_a_lower_clock(cli, tmp_path):
    """One config twice, B's window at a lower SM clock (its result.json edited): the same
    kernels, the clock named as the cause, with B's throttle reasons."""
    a = copy_run(tmp_path / "a", state(1980))
    b = copy_run(tmp_path / "b", state(1755, ["gpu_idle", "sw_power_cap"]))
    done = cli("compare", str(a), str(b), "--top", "1", "--view", "full")
    assert done.code == 0, done.stderr
    assert (
        "why B differs from A (clock): same kernels at a lower SM clock in B: 1755 MHz "
        "against 1980 MHz (-11.4 %)"
    ) in done.stdout
    assert "GPU state B: NVIDIA H100 80GB HBM3, SM 1755 of 1980 MHz" in done.stdout
    e = validate("compare", json_of(cli("compare", str(a), str(b), "--json")))["explanation"]
    assert e["cause"] == "clock" and e["same_config"] is True and e["differs_in"] == []
    assert (e["clock_a_mhz"], e["clock_b_mhz"]) == (1980, 1755)
    assert e["added"] == [] and e["removed"] == [] and e["kernel_time_ratio"] == 1.0
    assert e["throttle_reasons_b"] == ["sw_power_cap"]
    said = explanation_line(msgspec.convert(e, Explanation))
    assert "; throttle reasons in B: sw_power_cap" in said


def test_a_side_without_gpu_state_still_explains_from_kernels(cli, tmp_path):
    a = copy_run(tmp_path / "a", state(1980))
    b = copy_run(tmp_path / "b", GpuState(not_recorded="no NVML"))
    e = json_of(cli("compare", str(a), str(b), "--json"))["explanation"]
    assert e["cause"] == "none" and e["kernel_time_ratio"] == 1.0
    assert difference_lines(msgspec.convert(e, Explanation)) == [
        "SM clock not recorded for B",
        "same kernels and kernel time",
    ]
    assert e["gpu_state_b"]["not_recorded"] == "no NVML"
    said = msgspec.convert(e, Explanation).gpu_state_b
    assert gpu_state_line(said) == "GPU state: not recorded (no NVML)"


def test_what_counts_as_another_config():
    """Iterations, the profiler schedule, names and the host are not the work a run did; the
    batch size, the backend's switches, the GPU and the libraries are."""
    from profiler.analysis.difference import differs_in_work

    a = runs.read_result(EAGER_BS8)
    b = msgspec.structs.replace(
        a,
        run_name="again",
        config=msgspec.structs.replace(a.config, iters=500, active=3, run_name="again", seed=1),
        environment=msgspec.structs.replace(
            a.environment, hostname="elsewhere", command_line=["other"]
        ),
    )
    assert differs_in_work(a, b) == []
    c = msgspec.structs.replace(
        b,
        config=msgspec.structs.replace(b.config, cudnn_benchmark=not a.config.cudnn_benchmark),
        environment=msgspec.structs.replace(b.environment, torch="2.99"),
    )
    assert differs_in_work(a, c) == ["cudnn_benchmark", "environment.torch"]
