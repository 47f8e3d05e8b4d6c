"""The TensorRT layer view on the committed H200 TensorRT runs."""

import json

import pytest

from profiler.runs.layout import engine_layer_files as layer_files
from profiler.trace.load import load_trace
from profiler.trace.trt_layers import MIN_COVERAGE, attribute, read_layers
from tests.conftest import FIXTURES

H200 = FIXTURES / "h200"
TRT_RUNS = ("ttrt_fp16_bs8", "ttrt_fp32_bs8")


def _attribution(run):
    ((layers, times),) = layer_files(H200 / "runs" / run)
    trace = load_trace(next((H200 / "tb_logs" / run).iterdir()))
    return attribute(read_layers(layers, times), trace)


@pytest.mark.parametrize("run", TRT_RUNS)
def test_at_least_90_percent_of_engine_kernel_time_is_attributed(run):
    a = _attribution(run)
    assert a.coverage >= MIN_COVERAGE
    assert a.method.startswith("launch order")  # the order check held in every call
    assert a.calls == 3  # three profiled steps, one engine call each
    # what is not attributed is listed; here nothing inside the engine is left over
    assert a.not_attributed.empty


@pytest.mark.parametrize("run", TRT_RUNS)
def test_attributed_kernels_fit_their_layers(run):
    """Independent of the order rule: pooling layers got a resampling kernel, Myelin
    convolution fusions (Corr*) a convolution kernel or a Myelin kernel, signal/wait none."""
    layers = _attribution(run).layers
    assert layers.loc[layers["type"] == "maxpool", "kernel"].str.contains("resample").all()
    events = layers[layers["type"].isin(["signal", "wait"])]
    assert events["kernel"].isna().all()
    corr = layers[layers["layer"].str.startswith("__myl_Corr")]
    assert corr["kernel"].str.contains("convFwd|__myl_").all()


def test_layer_table_columns_come_from_the_engine_files():
    layers = _attribution("ttrt_fp16_bs8").layers
    first = layers.iloc[0]
    assert first["layer"] == "__myl_MoveConc_myl0_0" and first["type"] == "kgen"
    assert first["precision"] == "Half"
    assert first["ms_per_call"] == pytest.approx(0.02028)
    assert layers["share_pct"].sum() == pytest.approx(100, abs=0.01)


def test_outside_engine_kernels_are_listed_apart():
    a = _attribution("ttrt_fp16_bs8")
    assert list(a.outside_engine["kernel"].str.contains("float16_copy")) == [True]


def test_summarize_view_layers(cli):
    out = cli("summarize", str(H200 / "runs" / "ttrt_fp16_bs8"), "--view", "layers", "--top", "5")
    assert out.code == 0, out.stderr
    assert "TensorRT engine 0: 73 layers (top 5 by share)" in out.stdout
    assert "100.0 % of engine kernel time attributed" in out.stdout
    data = json.loads(
        cli("summarize", str(H200 / "runs" / "ttrt_fp32_bs8"), "--view", "layers", "--json").stdout
    )
    engine = data["engines"][0]
    assert engine["coverage_pct"] >= 90 and len(engine["layers"]) == 73


def test_layers_view_of_an_eager_run_is_a_one_line_error(cli):
    out = cli("summarize", str(H200 / "runs" / "pytorch_fp32_bs8"), "--view", "layers")
    assert out.code == 2
    assert out.stderr.startswith("error: no engine_layers_*.json")
    assert len(out.stderr.strip().splitlines()) == 1


def test_layers_out_writes_a_csv_with_full_kernel_names(cli, tmp_path):
    out = cli(
        "summarize",
        str(H200 / "runs" / "ttrt_fp16_bs8"),
        "--view",
        "layers",
        "--out",
        str(tmp_path / "layers"),
    )
    assert out.code == 0, out.stderr
    import pandas as pd

    frame = pd.read_csv(tmp_path / "layers" / "layers_0.csv")
    assert len(frame) == 73 and frame["kernel"].dropna().str.len().max() > 48
