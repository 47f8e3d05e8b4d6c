"""The numeric-check maths against hand-computed values, and NaN handling (no fakes)."""

import math

import pytest
import torch

from profiler.collect.numerics import compare, exceeds


def test_figures_match_hand_computed_values():
    reference = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    output = torch.tensor([[1.0, 0.0], [0.0, 2.0]])
    result = compare(output, reference)
    # diff = [[0, 0], [0, 1]]; ||diff|| = 1, ||ref|| = sqrt(2), ||out|| = sqrt(5), out.ref = 3
    assert result["max_abs_error"] == pytest.approx(1.0)
    assert result["mean_abs_error"] == pytest.approx(0.25)
    assert result["rel_l2_error"] == pytest.approx(1 / math.sqrt(2))
    assert result["cosine_similarity"] == pytest.approx(3 / math.sqrt(10))
    assert result["top1_agreement"] == 1.0 and result["finite"] is True
    assert result["elements"] == 4


def test_identical_tensors_agree_exactly():
    x = torch.randn(3, 5)
    result = compare(x.clone(), x)
    assert result["max_abs_error"] == 0 and result["rel_l2_error"] == 0
    assert result["cosine_similarity"] == pytest.approx(1.0)
    assert exceeds(result, 0.0) is None


def test_top1_agreement_per_row_and_per_position():
    reference = torch.tensor([[0.0, 1.0], [1.0, 0.0]])
    output = torch.tensor([[1.0, 0.0], [1.0, 0.0]])  # first row flips, second agrees
    assert compare(output, reference)["top1_agreement"] == 0.5
    # [batch, seq, vocab]: argmax over the vocabulary, per position
    ref3 = torch.zeros(1, 4, 3)
    ref3[0, :, 0] = 1
    out3 = ref3.clone()
    out3[0, 3, 2] = 5  # one of four positions changes its top-1
    result = compare(out3, ref3)
    assert result["top1_agreement"] == 0.75 and result["top1_over"].endswith("per position")


def test_no_top1_without_a_class_dimension():
    assert compare(torch.ones(4), torch.ones(4))["top1_agreement"] is None
    assert compare(torch.ones(4, 1), torch.ones(4, 1))["top1_agreement"] is None


@pytest.mark.parametrize("where", ["output", "reference"])
@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_nan_or_inf_anywhere_fails_and_is_never_a_number(where, bad):
    good = torch.ones(2, 3)
    broken = good.clone()
    broken[1, 2] = bad
    output, reference = (broken, good) if where == "output" else (good, broken)
    result = compare(output, reference)
    assert result["finite"] is False
    assert all(
        result[k] is None
        for k in (
            "max_abs_error",
            "mean_abs_error",
            "rel_l2_error",
            "cosine_similarity",
            "top1_agreement",
        )
    )
    # even the most generous threshold fails
    assert "NaN or Inf" in exceeds(result, 1e30)


def test_all_zero_reference():
    assert compare(torch.zeros(3), torch.zeros(3))["rel_l2_error"] == 0.0
    result = compare(torch.ones(3), torch.zeros(3))
    assert result["rel_l2_error"] is None and result["cosine_similarity"] is None
    assert exceeds(result, 10.0) == "the relative error is not finite"


def test_threshold():
    result = compare(torch.tensor([1.0, 1.1]), torch.tensor([1.0, 1.0]))
    assert exceeds(result, 0.1) is None
    assert "exceeds --max-rel-error 0.01" in exceeds(result, 0.01)


def test_mixed_dtypes_are_compared_in_float64():
    reference = torch.randn(2, 10)
    result = compare(reference.to(torch.float16), reference)
    assert 0 < result["rel_l2_error"] < 1e-3


def test_shape_mismatch_is_an_error():
    with pytest.raises(ValueError, match="differs"):
        compare(torch.ones(2, 3), torch.ones(3, 2))
