"""Ceilings name their source, NVL parts get their own datasheet rows, and `peaks` measures INT8
on the Tensor Cores (torch._int_mm with a column-major B). The measured H100 peaks are the
committed docs/gpu/h100/peaks.json, whose INT8 figure (127 TOPS, a row-major B) predates that."""

import json

import pytest

from profiler.analysis.roofline import (
    ceilings_from_peaks,
    ceilings_words,
    datasheet_ceilings,
    dense_ratio,
    int8_reaches_tensor_cores,
)

from .conftest import ROOT

H100_PEAKS = json.loads((ROOT / "docs" / "gpu" / "h100" / "peaks.json").read_text())


@pytest.mark.parametrize(
    "name, row, fp16, bandwidth",
    [
        ("NVIDIA H100 NVL", "H100 NVL", 835.5, 3900.0),
        ("NVIDIA H100 80GB HBM3", "H100", 989.4, 3350.0),
        ("NVIDIA H100 PCIe", "H100 PCIe", 756.0, 2000.0),
        ("NVIDIA H200 NVL", "H200 NVL", 835.5, 4800.0),
        ("NVIDIA H200", "H200", 989.4, 4800.0),
    ],
)
def test_each_gpu_name_takes_its_own_datasheet_row(name, row, fp16, bandwidth):
    c = datasheet_ceilings(name)
    assert c.matmul_tflops["fp16"] == fp16 and c.bandwidth_gbs == bandwidth
    assert c.source == f"datasheet ({row}), not measured"
    # every ceiling names the document it comes from, dense figures
    assert all(
        f"datasheet ({row}), not measured: NVIDIA" in c.sources[k]
        and c.sources[k].endswith("dense")
        for k in (*c.matmul_tflops, "bandwidth")
    )
    assert ceilings_words(c, "fp16") == c.sources["fp16"]


def test_dense_ratios_are_the_datasheets():
    assert dense_ratio("NVIDIA H100 80GB HBM3", "fp16") == pytest.approx(989.4 / 67.0)
    assert round(dense_ratio("NVIDIA H100 80GB HBM3", "fp16"), 1) == 14.8  # not TF32's 7.4
    assert round(dense_ratio("NVIDIA H100 80GB HBM3", "tf32"), 1) == 7.4
    assert dense_ratio("NVIDIA H100 NVL", "fp16") == pytest.approx(835.5 / 60.0)
    assert dense_ratio("a GPU of no row", "fp16") is None


def test_the_committed_h100_int8_measurement_bounds_nothing_so_the_datasheet_stands_in():
    measured = H100_PEAKS["matmul_tflops"]["int8"]
    assert measured < 0.07 * 1978.9  # 127 TOPS: 6.4 % of the SXM's dense 1,979
    assert not int8_reaches_tensor_cores(H100_PEAKS)
    c = ceilings_from_peaks(H100_PEAKS, "peaks.json")
    assert c.matmul_tflops["int8"] == 1978.9
    assert c.sources["int8"].startswith("datasheet (H100), not measured: NVIDIA H100 datasheet")
    assert "row-major B" in c.sources["int8"]
    # the other ceilings stay measured, and say with what
    assert c.matmul_tflops["fp16"] == H100_PEAKS["matmul_tflops"]["fp16"]
    assert c.sources["fp16"] == "measured by peaks (peaks.json) with torch.mm (cuBLAS)"
    assert c.sources["bandwidth"].endswith("a device-to-device copy")
    words = ceilings_words(c, "int8")
    assert "int8: datasheet (H100)" in words and "bandwidth: measured by peaks" in words


def test_a_tensor_core_int8_measurement_is_kept_and_named():
    detail = {
        **H100_PEAKS["matmul_detail"]["int8"],
        "b_layout": "column-major",
        "kernel": "torch._int_mm (cuBLASLt IMMA; A row-major, B column-major)",
    }
    peaks = {**H100_PEAKS, "matmul_detail": {**H100_PEAKS["matmul_detail"], "int8": detail}}
    c = ceilings_from_peaks(peaks, "peaks.json")
    assert c.matmul_tflops["int8"] == H100_PEAKS["matmul_tflops"]["int8"]
    assert c.sources["int8"] == (
        "measured by peaks (peaks.json) with torch._int_mm (cuBLASLt "
        "IMMA; A row-major, B column-major)"
    )


def test_peaks_times_int8_with_int_mm_and_a_column_major_b(monkeypatch):
    """The INT8 call `peaks` times: torch._int_mm, A row-major and B column-major (K contiguous
    in both, the IMMA kernels' layout). torch._int_mm itself is stood in for: it needs a GPU."""
    import torch

    from profiler.collect import measured_peaks

    seen = []
    monkeypatch.setattr(torch, "_int_mm", lambda a, b: seen.append((a, b)), raising=False)
    call = measured_peaks.int8_case(32, torch.device("cpu"), torch.Generator().manual_seed(0))
    call()
    ((a, b),) = seen
    assert a.dtype == b.dtype == torch.int8 and a.shape == b.shape == (32, 32)
    assert a.stride() == (32, 1)  # row-major A: K contiguous
    assert b.stride() == (1, 32)  # column-major B: K contiguous
    assert "torch._int_mm" in measured_peaks.KERNELS["int8"]
    # without a GPU INT8 is not measured, and says why
    assert measured_peaks._matmul_rate("int8", 16, torch.device("cpu"), 1, 1)["tflops"] is None


def test_a_peaks_cache_of_an_older_schema_is_measured_again(tmp_path, monkeypatch):
    from profiler.collect import measured_peaks

    facts = measured_peaks.machine_facts()
    path = measured_peaks.cache_path(facts, tmp_path)
    path.write_text(json.dumps({**H100_PEAKS, "schema": 1}))
    monkeypatch.setattr(
        measured_peaks,
        "measure",
        lambda device, sizes: {"schema": measured_peaks.PEAKS_SCHEMA, "new": True},
    )
    data, _, measured_now = measured_peaks.peaks(tmp_path)
    assert measured_now and data["new"]
    again, _, measured_now = measured_peaks.peaks(tmp_path)
    assert not measured_now and again["new"]
