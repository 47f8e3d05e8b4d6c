"""Where does ttrt_fp8's NaN come from? One model, step by step, on a GPU.

    python scripts/fp8_diagnose.py --model resnet50 --bs 8
    python scripts/fp8_diagnose.py --model distilbert --bs 12

Builds the model as `run` does (seeded random weights), then checks, each against the FP32
output on the same input, by relative L2 error and NaN/Inf counts:

1. the FP16 model (what ttrt_fp16 starts from);
2. the FP16 activations, layer by layer: the largest magnitude each module's output reaches
   (FP16 saturates at 65504; a layer past it makes Inf, and Inf - Inf makes NaN);
3. ModelOpt's FP8 fake-quantized model in PyTorch (mtq.FP8_DEFAULT_CFG, calibrated on the same
   batches as the backend): if it is already NaN, the calibration or the scales are the cause;
   the quantizers' amax values are listed (zero, Inf or NaN amax give a zero or infinite scale);
4. the Torch-TensorRT engine built from it as the backend builds it: if only this is NaN, the
   engine is the cause;
5. variants that leave parts in FP16 (weights only, activations only, no first convolution / no
   classifier) to find which part breaks.
Prints one line per step; the last line is the verdict.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

from profiler.collect import models  # noqa: E402
from profiler.runs.config import RunConfig  # noqa: E402


def rel_l2(out, ref) -> float:
    out, ref = out.float().flatten(), ref.float().flatten()
    return float(torch.linalg.vector_norm(out - ref) / torch.linalg.vector_norm(ref))


def first_tensor(value):
    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, (tuple, list)):
        return first_tensor(value[0])
    if isinstance(value, dict):
        return first_tensor(next(iter(value.values())))
    for key in ("logits", "last_hidden_state"):
        if hasattr(value, key):
            return getattr(value, key)
    raise TypeError(type(value))


def report(label: str, out, ref) -> bool:
    out = first_tensor(out)
    bad = int((~torch.isfinite(out.float())).sum())
    error = rel_l2(out, ref) if bad == 0 else float("nan")
    print(f"{label:<52} rel L2 {error:.3e}  non-finite {bad} of {out.numel()}", flush=True)
    return bad > 0


def largest_activations(model, inputs, top: int = 5):
    peaks = {}

    def hook(name):
        def record(module, args, output):
            try:
                value = first_tensor(output)
            except (TypeError, StopIteration):
                return
            if isinstance(value, torch.Tensor) and value.is_floating_point():
                finite = torch.isfinite(value)
                peaks[name] = (
                    float(value[finite].abs().max()) if finite.any() else float("inf"),
                    int((~finite).sum()),
                )

        return record

    handles = [m.register_forward_hook(hook(n)) for n, m in model.named_modules() if n]
    with torch.no_grad():
        model(*inputs)
    for handle in handles:
        handle.remove()
    ranked = sorted(peaks.items(), key=lambda kv: -kv[1][0])
    non_finite = [(n, p) for n, p in peaks.items() if p[1]]
    print(
        f"FP16 activations: largest |x| {ranked[0][1][0]:.4g} at {ranked[0][0]}; "
        f"{len(non_finite)} modules with non-finite outputs"
        + (f", first: {non_finite[0][0]}" if non_finite else ""),
        flush=True,
    )
    for name, (peak, bad) in ranked[:top]:
        print(f"    {name:<48} max |x| {peak:.4g}  non-finite {bad}")


def amax_summary(model) -> None:
    rows = []
    for name, module in model.named_modules():
        amax = getattr(module, "amax", None)
        if isinstance(amax, torch.Tensor):
            rows.append((name, amax.detach().float()))
    if not rows:
        print("quantizers: none with an amax found")
        return
    zero = [n for n, a in rows if bool((a == 0).any())]
    bad = [n for n, a in rows if not bool(torch.isfinite(a).all())]
    values = torch.cat([a.flatten() for _, a in rows])
    print(
        f"quantizers: {len(rows)} with amax; min {float(values.min()):.4g}, max "
        f"{float(values.max()):.4g}; {len(zero)} with a zero amax, {len(bad)} with a "
        f"non-finite amax"
        + (f" (first zero: {zero[0]})" if zero else "")
        + (f" (first non-finite: {bad[0]})" if bad else ""),
        flush=True,
    )


def quantize(model, batches, config):
    import modelopt.torch.quantization as mtq

    def loop(module):
        for batch in batches:
            module(*batch)

    with torch.no_grad():
        return mtq.quantize(model, config, loop)


def engine(model, inputs):
    import torch_tensorrt
    from modelopt.torch.quantization.utils import export_torch_mode

    with torch.no_grad(), export_torch_mode():
        exported = torch.export.export(model, tuple(inputs), strict=False)
        return torch_tensorrt.dynamo.compile(
            exported,
            inputs=list(inputs),
            use_explicit_typing=True,
            min_block_size=1,
            disable_tf32=True,
        )


def variant_config(base: dict, keep_fp16: list[str]) -> dict:
    """``base`` with the quantizers matching ``keep_fp16`` turned off: a later entry wins, in
    both of ModelOpt's forms (an ordered list of entries since 0.4x, a dict before)."""
    entries = base["quant_cfg"]
    if isinstance(entries, list):
        quant_cfg = [*entries, *({"quantizer_name": p, "enable": False} for p in keep_fp16)]
    else:
        quant_cfg = {**entries, **{p: {"enable": False} for p in keep_fp16}}
    return {**base, "quant_cfg": quant_cfg}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet50")
    parser.add_argument("--bs", type=int, default=8)
    parser.add_argument("--calib-batches", type=int, default=8)
    parser.add_argument("--no-engine", action="store_true", help="skip the TensorRT builds")
    args = parser.parse_args()
    device = torch.device("cuda")
    config = RunConfig(model=args.model, batch_size=args.bs, backend="ttrt_fp8")
    model, inputs = models.build(config, device=device)
    gen = torch.Generator().manual_seed(1)
    fresh = tuple(
        torch.randn(t.shape, generator=gen) if t.is_floating_point() else t for t in inputs
    )
    inputs32 = tuple(t.to(device) for t in fresh)
    model = model.to(device).float().eval()
    with torch.no_grad():
        ref = first_tensor(model(*inputs32)).float()
    print(
        f"{args.model} bs {args.bs} on {torch.cuda.get_device_name()}: FP32 reference "
        f"max |y| {float(ref.abs().max()):.4g}",
        flush=True,
    )
    model16 = model.half()
    inputs16 = tuple(t.half() if t.is_floating_point() else t for t in inputs32)
    fp16_bad = report("FP16 eager", model16(*inputs16), ref)
    largest_activations(model16, inputs16)
    batches = [
        tuple(
            (torch.randn(t.shape, generator=gen).to(device).half() if t.is_floating_point() else t)
            for t in inputs32
        )
        for _ in range(args.calib_batches)
    ]
    import modelopt.torch.quantization as mtq

    results = {}
    variants = {
        "FP8 (mtq.FP8_DEFAULT_CFG)": [],
        "FP8, weights only": ["*input_quantizer"],
        "FP8, activations only": ["*weight_quantizer"],
        "FP8, classifier in FP16": ["*fc*", "*classifier*", "*pre_classifier*"],
        # last: on the H100 with TensorRT-RTX 1.4 this engine failed with an illegal
        # memory access inside a cuDNN convolution, which ends the process
        "FP8, first conv/embeddings in FP16": ["*conv1*", "*embeddings*"],
    }
    for label, keep in variants.items():
        began = time.perf_counter()
        q = quantize(
            models.build(config, device=device)[0].to(device).half().eval(),
            batches,
            variant_config(mtq.FP8_DEFAULT_CFG, keep),
        )
        if not keep:
            amax_summary(q)
        with torch.no_grad():
            fake_bad = report(f"{label}: fake-quant in PyTorch", q(*inputs16), ref)
        engine_bad = None
        if not args.no_engine:
            try:
                compiled = engine(q, inputs16)
                with torch.no_grad():
                    engine_bad = report(f"{label}: TensorRT engine", compiled(*inputs16), ref)
            except Exception as error:  # a failed build is a finding, not the end
                print(
                    f"{label}: TensorRT build failed: {type(error).__name__}: "
                    f"{str(error).splitlines()[0][:200]}"
                )
        results[label] = (fake_bad, engine_bad)
        print(f"    ({time.perf_counter() - began:.1f} s)", flush=True)
    base_fake, base_engine = results["FP8 (mtq.FP8_DEFAULT_CFG)"]
    if fp16_bad:
        verdict = "the FP16 model itself is non-finite: FP16 range, not FP8"
    elif base_fake:
        verdict = "the fake-quantized PyTorch model is non-finite: calibration/scales"
    elif base_engine:
        clean = [label for label, (_, e) in results.items() if e is False]
        verdict = (
            "PyTorch's fake-quant is finite, the engine is not: the TensorRT engine; "
            f"finite variants: {', '.join(clean) or 'none'}"
        )
    else:
        verdict = "no NaN here (this model, batch and seed)"
    print(f"verdict: {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
