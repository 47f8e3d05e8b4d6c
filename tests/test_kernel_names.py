"""Short kernel names stay distinct wherever the full names differ."""

import pytest

from profiler.trace.rules import distinct_short_names, fold_repeats, middle_ellipsis
from profiler.trace.summary import summarize
from tests.conftest import FIXTURES

TRACES = sorted((FIXTURES / "h200" / "tb_logs").glob("*/*.pt.trace.json.gz"))


@pytest.mark.parametrize("trace", TRACES, ids=lambda p: p.parent.name)
def test_no_two_short_names_in_a_kernel_table_are_equal(trace):
    table = summarize(trace).kernels.table
    assert table["name"].is_unique
    assert table["kernel"].is_unique
    assert (table["kernel"].str.len() <= 48).all()


def test_the_eight_cudnn_variants_no_longer_look_the_same():
    table = summarize(
        next((FIXTURES / "h200" / "tb_logs" / "ttrt_fp16_bs8").iterdir())
    ).kernels.table
    cudnn = table[table["name"].str.startswith("cudnn_generated_fort_native")]
    assert len(cudnn) > 8 and cudnn["kernel"].is_unique


def test_compare_kernel_table_names_are_distinct():
    from profiler.trace.diff import kernel_diff

    runs = FIXTURES / "h200" / "tb_logs"
    a = summarize(next((runs / "ttrt_fp32_bs8").iterdir()))
    b = summarize(next((runs / "ttrt_fp16_bs8").iterdir()))
    frame = kernel_diff(a, b)
    assert frame["name"].is_unique and frame["kernel"].is_unique


def test_helpers():
    assert fold_repeats("convFwd_pointwise_pointwise_pointwise_knob") == "convFwd_pointwise×3_knob"
    assert middle_ellipsis("abcdefghij", 5) == "ab…ij"
    same_after_folding = ["void k<1>(int)", "void k<2>(int)", "void k<3>(int)"]
    shorts = distinct_short_names(same_after_folding)
    assert len(set(shorts)) == 3
    assert distinct_short_names(["void k<1>(int)", "void k<1>(int)"]) == ["k", "k"]


def test_variants_are_told_apart_by_the_words_that_differ_not_by_a_number_suffix():
    """cuDNN's knob_21 and knob_23 (the same name otherwise) read as such, and no kernel of
    the H200 TensorRT trace needs a #k suffix (they read alike at any width before)."""
    table = summarize(
        next((FIXTURES / "h200" / "tb_logs" / "ttrt_fp16_bs8").iterdir())
    ).kernels.table
    shorts = set(table["kernel"])
    assert not any(" #" in short for short in shorts), sorted(shorts)
    for knob in ("knob_21_128x128x32_10", "knob_23_128x128x32_10"):
        assert any(f"pointwise×2_{knob}" in short for short in shorts), knob
