"""Roofline and measured advice on the real H200 runs.

The fixtures' result.json files predate FLOP counting, so their FLOPs and minimum bytes come from
tests/fixtures/roofline/resnet50_roofline_inputs.json, written by
``python scripts/roofline_inputs.py --model resnet50 --bs 1,8,16,32 --precision fp32,fp16``
(FlopCounterMode on torchvision's resnet50 on the meta device). The sweep context is the warm
ResNet50 sweep of docs/sweep/warm/benchmark.csv, measured on the same H200 machine and software
on the same day as the fixture runs.
"""

import json

import pandas as pd
import pytest

from profiler.analysis.run_analysis import RunAnalysis

from .conftest import FIXTURES, ROOT

H200 = FIXTURES / "h200"
FLOPS = json.loads((FIXTURES / "roofline" / "resnet50_roofline_inputs.json").read_text())
WARM = pd.read_csv(ROOT / "docs" / "sweep" / "warm" / "benchmark.csv")


def _result(run: str):
    """The fixture's result.json read as RunResult (as the commands read it), with the FLOPs
    of the --flops table."""
    from profiler.analysis.insight import with_flops
    from profiler.runs.result import read_result

    return with_flops(read_result(H200 / "runs" / run), FLOPS)


def _evidence(run: str, sweep: pd.DataFrame | None = None, ncu: bool = False):
    from profiler.analysis.insight import evidence, ncu_join
    from profiler.analysis.roofline import ceilings_for, result_roofline
    from profiler.runs.command_targets import resolve_target
    from profiler.runs.layout import ncu_csv_of

    target = resolve_target(str(H200 / "runs" / run))
    summary = RunAnalysis(target).summary
    result = _result(run)
    roofline = result_roofline(result, ceilings_for(result, None))
    joined = (
        ncu_join(summary, ncu_csv_of(str(FIXTURES / "h200_ncu" / "runs" / run))) if ncu else None
    )
    return evidence(summary, result, H200 / "runs" / run, roofline, joined, sweep)


def evidence(advice) -> dict:
    from profiler.report.advice_view import evidence

    return evidence(advice)


def projected_gain(advice) -> str:
    from profiler.report.advice_view import projected_gain

    return projected_gain(advice)


def _fired(ev) -> dict:
    from profiler.analysis.advice import advise

    return {a.rule: a for a in advise(ev)}


# ---- roofline -------------------------------------------------------------------------------


def test_flop_table_is_resnet50():
    per_image = FLOPS["roofline_inputs"]["fp32_bs1"]["flops_per_batch"]
    assert per_image == pytest.approx(8.18e9, rel=0.01)  # 4.09 GMACs, torchvision's figure
    assert FLOPS["roofline_inputs"]["fp16_bs8"]["flops_per_batch"] == 8 * per_image
    fp16, fp32 = FLOPS["roofline_inputs"]["fp16_bs8"], FLOPS["roofline_inputs"]["fp32_bs8"]
    assert fp32["weight_bytes"] == pytest.approx(2 * fp16["weight_bytes"], rel=0.01)


def test_roofline_of_eager_fp16_against_the_datasheet():
    from profiler.analysis.roofline import ceilings_for, result_roofline

    result = _result("pytorch_fp16_bs8")
    r = result_roofline(result, ceilings_for(result, None))
    inputs = result.roofline_inputs
    assert inputs.source == "--flops table"
    seconds = result.timing.p50_ms / 1e3
    assert r.achieved_tflops == pytest.approx(inputs.flops_per_batch / seconds / 1e12)
    assert r.achieved_gbs == pytest.approx(inputs.min_bytes_per_batch / seconds / 1e9)
    assert r.matmul_key == "fp16" and r.peak_tflops == 989.4 and r.peak_gbs == 4800.0
    assert r.pct_of_compute == pytest.approx(100 * r.achieved_tflops / 989.4)
    assert r.bound == "compute" and r.ridge == pytest.approx(989.4e12 / 4800e9)
    assert "datasheet" in r.ceilings_source


def test_measured_peaks_win_over_the_datasheet_and_tf32_is_chosen_for_trt_fp32():
    from profiler.analysis.roofline import ceilings_for, matmul_key, result_roofline

    result = _result("ttrt_fp32_bs8")
    peaks = {
        "machine": {"device": "NVIDIA H200"},
        "copy": {"gb_per_s": 4000.0},
        "matmul_tflops": {
            "fp32": 50.0,
            "tf32": 400.0,
            "fp16": 700.0,
            "bf16": 700.0,
            "fp8": None,
            "int8": None,
        },
    }
    r = result_roofline(result, ceilings_for(result, peaks, "cache.json"))
    assert r.matmul_key == "tf32" and r.peak_tflops == 400.0 and r.peak_gbs == 4000.0
    # every ceiling names its source: the file, and the call `peaks` timed
    assert r.ceilings_source == (
        "measured (cache.json): tf32 with torch.mm with TF32 (cuBLAS), "
        "bandwidth with a device-to-device copy"
    )
    other_gpu = {**peaks, "machine": {"device": "NVIDIA L4"}}
    assert ceilings_for(result, other_gpu).source.startswith("datasheet")
    assert matmul_key("fp32", False, "pytorch_fp32") == "fp32"
    assert matmul_key("fp32", True, "pytorch_fp32") == "tf32"


def test_unknown_gpu_gives_rates_without_percentages():
    import msgspec

    from profiler.analysis.roofline import ceilings_for, result_roofline

    result = _result("pytorch_fp16_bs8")
    environment = msgspec.structs.replace(
        result.environment, gpu={**result.environment.gpu, "name": "Some Future GPU"}
    )
    result = msgspec.structs.replace(result, environment=environment)
    assert ceilings_for(result, None) is None
    r = result_roofline(result, None)
    assert r.achieved_tflops > 0 and r.pct_of_compute is None and r.bound == "unknown"


def test_no_roofline_without_flops():
    from profiler.analysis.roofline import result_roofline
    from profiler.runs.result import read_result, result_from_dict, result_to_dict

    raw = read_result(H200 / "runs" / "pytorch_fp16_bs8")
    assert result_roofline(raw, None) is None
    failed = {**result_to_dict(raw), "roofline_inputs": {"error": "FLOPs not counted"}}
    assert result_roofline(result_from_dict(failed), None) is None


def test_gemm_flops_from_recorded_shapes(tmp_path):
    """A real CPU trace recorded with record_shapes: the addmm of a Linear layer."""
    import torch

    from profiler.analysis.roofline import gemm_roofline, kernel_roofline, op_flops, shaped_ops

    assert op_flops("aten::mm", [[4, 8], [8, 16]]) == 2 * 4 * 8 * 16
    assert op_flops("aten::bmm", [[2, 4, 8], [2, 8, 16]]) == 2 * 2 * 4 * 8 * 16
    assert op_flops("aten::addmm", [[16], [4, 8]]) is None  # incomplete
    assert op_flops("aten::relu", [[4, 8]]) is None
    layer = torch.nn.Linear(32, 64)
    with torch.profiler.profile(record_shapes=True) as prof:
        layer(torch.randn(8, 32))
    path = tmp_path / "cpu.pt.trace.json"
    prof.export_chrome_trace(str(path))
    ops = shaped_ops(path)
    assert list(ops["operator"]) == ["aten::addmm"]
    assert ops["flops"].iloc[0] == 2 * 8 * 32 * 64
    table = kernel_roofline(ops, {}, 100.0)  # no GPU kernels on the CPU: no rate
    assert table["calls"].iloc[0] == 1 and table["tflops"].isna().all()
    whole = gemm_roofline(path, 100.0)
    assert list(whole["flops_per_call"]) == [2 * 8 * 32 * 64] and whole["gpu_us"].iloc[0] == 0


# ---- advice: each rule where it fires and where it must not --------------------------------


def test_launch_bound_matches_what_the_sweep_measured():
    """Eager FP16 at bs 8 is launch-bound; TensorRT FP16 at bs 8 really was faster in the sweep,
    by more than the idle time allows nothing else to explain."""
    advice = _fired(_evidence("pytorch_fp16_bs8", sweep=WARM))["launch-bound"]
    assert advice.measured["ttrt_fp16"].speedup > 2
    assert advice.measured["inductor_fp16"].speedup > 1
    assert round(100 * advice.figures["idle_share"]) == 81
    assert "81 % of the timed p50" in evidence(advice)["GPU idle"]
    # the projected bound holds: removing all idle time would allow at most 1 / (1 - idle)
    assert advice.measured["ttrt_fp16"].speedup <= 1 / (1 - 0.81)
    assert "launch-bound" in _fired(_evidence("inductor_fp16_bs8"))
    for run in (
        "ttrt_fp16_bs8",
        "ttrt_fp32_bs8",
        "pytorch_fp32_bs8",
        "inductor_fp16_bs8_maxautotune",
    ):  # busy GPU, or CUDA graphs already
        assert "launch-bound" not in _fired(_evidence(run)), run


def test_fp32_on_cuda_cores_quotes_the_fp16_cell_of_the_sweep():
    advice = _fired(_evidence("pytorch_fp32_bs8", sweep=WARM))["fp32-cuda-cores"]
    assert advice.figures["tensor_core_share"] == 0
    assert evidence(advice)["in Tensor Core kernels"] == "0 %"
    assert "the sweep measured pytorch_fp16" in projected_gain(advice)
    bs8 = WARM[WARM["bs"] == 8].set_index("backend")["p50_ms"]
    assert advice.measured["pytorch_fp16"].speedup == pytest.approx(
        bs8["pytorch_fp32"] / bs8["pytorch_fp16"], abs=0.01
    )
    for run in ("ttrt_fp32_bs8", "pytorch_fp16_bs8"):  # TF32 on Tensor Cores; half precision
        assert "fp32-cuda-cores" not in _fired(_evidence(run)), run


def test_low_occupancy_from_ncu_leaves_tensor_core_convolutions_alone():
    advice = _fired(_evidence("pytorch_fp16_bs8", ncu=True))["low-occupancy"]
    assert "copy" in advice.figures["largest"] and advice.figures["largest_occupancy_pct"] < 25
    assert len(evidence(advice)["largest"].split(" (")[0]) <= 60
    for run in ("ttrt_fp16_bs8", "inductor_fp16_bs8"):
        assert "low-occupancy" not in _fired(_evidence(run, ncu=True)), run
    assert "low-occupancy" not in _fired(_evidence("pytorch_fp16_bs8"))  # no ncu.csv


def test_batch_headroom_from_the_sweep():
    advice = _fired(_evidence("pytorch_fp16_bs8", sweep=WARM))["batch-headroom"]
    assert (advice.figures["from_bs"], advice.figures["to_bs"]) == (16, 32)
    assert "bs16 to bs32" in evidence(advice)["last step"]
    one_size = WARM[WARM["bs"] == 8]
    assert "batch-headroom" not in _fired(_evidence("pytorch_fp16_bs8", sweep=one_size))
    # the same cells with throughput flat from bs 16 to bs 32 (a constructed table)
    flat = WARM.copy()
    rows = flat["backend"] == "pytorch_fp16"
    flat.loc[rows & (flat["bs"] == 32), "throughput_per_s"] = float(
        flat.loc[rows & (flat["bs"] == 16), "throughput_per_s"].iloc[0]
    )
    assert "batch-headroom" not in _fired(_evidence("pytorch_fp16_bs8", sweep=flat))


def test_trt_fp32_layers_fire_only_in_a_half_precision_engine():
    from profiler.analysis.advice import Evidence, read_trt_layers

    fp32_layers = read_trt_layers(H200 / "runs" / "ttrt_fp32_bs8")
    assert "trt-fp32-layers" not in _fired(_evidence("ttrt_fp16_bs8"))  # every output Half
    assert "trt-fp32-layers" not in _fired(_evidence("ttrt_fp32_bs8"))  # FP32 asked for
    # the FP32 engine's layers read as if an FP16 run had left them in FP32
    advice = _fired(Evidence(backend="ttrt_fp16", precision="fp16", trt_layers=fp32_layers))[
        "trt-fp32-layers"
    ]
    assert advice.figures["fp32_layers"] == 57
    assert evidence(advice)["layers with FP32 outputs"].startswith("57 of")


def test_memory_bound_fires_for_tf32_at_batch_one_not_for_fp16_at_eight():
    """TensorRT FP32 (TF32) at bs 1: 79 FLOP/byte against an H200 ridge of 103, and the
    minimum bytes moved at a small share of 4.8 TB/s (p50 from the warm sweep)."""
    from profiler.analysis.advice import Evidence
    from profiler.analysis.roofline import datasheet_ceilings, run_roofline

    p50 = float(WARM[(WARM["backend"] == "ttrt_fp32") & (WARM["bs"] == 1)]["p50_ms"].iloc[0])
    r = run_roofline(
        FLOPS["roofline_inputs"]["fp32_bs1"], p50, datasheet_ceilings("NVIDIA H200"), "tf32"
    )
    assert r.bound == "memory" and r.pct_of_bandwidth < 50
    advice = _fired(Evidence(backend="ttrt_fp32", precision="fp32", roofline=r))
    assert "memory-bound" in advice
    assert "memory-bound" not in _fired(_evidence("pytorch_fp16_bs8"))


def test_every_rule_names_its_source():
    from profiler.analysis.advice import RULES

    assert len({r.id for r in RULES}) == len(RULES) == 9
    assert all(r.source and r.action and r.title for r in RULES)


def test_roofline_inputs_are_an_optional_typed_field_of_the_run_result():
    """Fixture runs from before FLOP counting read (no roofline_inputs); a count, a failed
    count and figures taken from a --flops table survive result.json's round trip."""
    from profiler.runs.result import RooflineInputs, read_result, result_from_dict, result_to_dict

    old = read_result(H200 / "runs" / "pytorch_fp16_bs8")
    assert old.roofline_inputs is None and result_to_dict(old)["roofline_inputs"] is None
    for inputs in (
        FLOPS["roofline_inputs"]["fp16_bs8"],
        {"error": "FLOPs not counted: x"},
        {**FLOPS["roofline_inputs"]["fp16_bs8"], "from": "--flops table"},
    ):
        data = {**result_to_dict(old), "roofline_inputs": inputs}
        back = result_from_dict(data)
        assert isinstance(back.roofline_inputs, RooflineInputs)
        assert result_to_dict(back)["roofline_inputs"] == inputs
    assert back.roofline_inputs.source == "--flops table"


def test_advice_figures_are_numbers_and_every_rule_is_worded():
    """Analysis returns numbers (report/advice_view words them): the only text in a rule's
    figures are names (GPU, kernel, category), never a formatted number."""
    from profiler.analysis.advice import RULES
    from profiler.report.advice_view import WORDING, advice_record

    names = {"gpu", "compute_capability", "largest", "largest_category"}
    fired = [
        *_fired(_evidence("pytorch_fp16_bs8", sweep=WARM, ncu=True)).values(),
        *_fired(_evidence("pytorch_fp32_bs8", sweep=WARM)).values(),
    ]
    assert {a.rule for a in fired} >= {
        "launch-bound",
        "fp32-cuda-cores",
        "low-occupancy",
        "batch-headroom",
    }
    assert set(WORDING) == {r.id for r in RULES}
    for a in fired:
        for key, value in a.figures.items():
            assert key in names or not isinstance(value, str), (a.rule, key, value)
        worded = advice_record(a)
        assert worded.evidence and all(isinstance(v, str) for v in worded.evidence.values())
