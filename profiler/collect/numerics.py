"""How far a backend's output is from the FP32 eager reference: pure maths on two tensors.

Both tensors are compared in float64. A NaN or Inf in either one makes the comparison fail: the
figures that are not finite are reported as None (JSON null) and ``finite`` is False, so a broken
output can never pass a threshold by comparing NaN > x as False.

Top-1 agreement applies when the output has a class dimension: two or more dimensions and at least
two entries in the last one. The argmax is taken over the last dimension, per row ([batch,
classes]) or per position ([batch, seq, vocab]), and the share of equal argmaxes is reported.
"""

from __future__ import annotations

import math

from profiler import units


def _finite_or_none(value: float) -> float | None:
    return value if math.isfinite(value) else None


def first_tensor(output):
    """The tensor an output is checked and described by: the output itself, or the first tensor
    of a tuple or list (detached); None when there is none."""
    import torch

    tensors = (
        [output]
        if isinstance(output, torch.Tensor)
        else [
            t
            for t in (output if isinstance(output, (tuple, list)) else [])
            if isinstance(t, torch.Tensor)
        ]
    )
    return tensors[0].detach() if tensors else None


def compare(output, reference) -> dict:
    """Max abs, mean abs, relative L2 (||out - ref|| / ||ref||), cosine similarity and, for
    classifier-shaped outputs, top-1 agreement of ``output`` against ``reference``."""
    import torch

    if tuple(output.shape) != tuple(reference.shape):
        raise ValueError(
            f"output shape {tuple(output.shape)} differs from the reference's "
            f"{tuple(reference.shape)}"
        )
    out = output.detach().to(torch.float64)
    ref = reference.detach().to(device=out.device, dtype=torch.float64)
    finite = bool(torch.isfinite(out).all().item() and torch.isfinite(ref).all().item())
    diff = out - ref
    ref_norm = float(torch.linalg.vector_norm(ref).item())
    diff_norm = float(torch.linalg.vector_norm(diff).item())
    out_norm = float(torch.linalg.vector_norm(out).item())
    if ref_norm > 0:
        rel_l2 = diff_norm / ref_norm
    else:  # an all-zero reference: only an all-zero output matches it
        rel_l2 = 0.0 if diff_norm == 0 else math.inf
    if ref_norm > 0 and out_norm > 0:
        cosine = float((out.reshape(-1) @ ref.reshape(-1)).item()) / (out_norm * ref_norm)
    else:
        cosine = math.nan
    result = {
        "finite": finite,
        "elements": out.numel(),
        "max_abs_error": _finite_or_none(float(diff.abs().max().item())) if out.numel() else 0.0,
        "mean_abs_error": _finite_or_none(float(diff.abs().mean().item())) if out.numel() else 0.0,
        "rel_l2_error": _finite_or_none(rel_l2),
        "cosine_similarity": _finite_or_none(cosine),
        "top1_agreement": None,
    }
    if out.dim() >= 2 and out.shape[-1] >= 2:
        agree = out.argmax(dim=-1) == ref.argmax(dim=-1)
        result["top1_agreement"] = float(agree.to(torch.float64).mean().item())
        result["top1_over"] = "last dimension, per " + ("row" if out.dim() == 2 else "position")
    if not finite:
        for name in (
            "max_abs_error",
            "mean_abs_error",
            "rel_l2_error",
            "cosine_similarity",
            "top1_agreement",
        ):
            result[name] = None
    return result


def exceeds(numerics: dict, max_rel_error: float) -> str | None:
    """Why this comparison fails ``--max-rel-error``, or None when it is within it."""
    if not numerics.get("finite", False):
        return "the output or the reference holds NaN or Inf values"
    rel = numerics.get("rel_l2_error")
    if rel is None:
        return "the relative error is not finite"
    if rel > max_rel_error:
        return (
            f"relative L2 error {units.significant(rel)} exceeds --max-rel-error "
            f"{units.plain(max_rel_error)}"
        )
    return None
