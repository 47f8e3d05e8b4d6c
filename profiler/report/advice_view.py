"""The advice rules' figures (profiler.analysis.advice: numbers) in words: each rule's evidence
as label -> text and the gain it projects. The terminal, the HTML report and --json show these."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeAlias

from profiler.analysis.advice import Advice
from profiler.analysis.records import AdviceRecord, BaselineNoise, PlannedAdvice
from profiler.analysis.timed_window import window_flags
from profiler.report.fmt import (
    count,
    marked,
    number,
    percent,
    ratio,
    with_unit,
)

#: a rule's figures (Advice.figures): each rule's own numbers by name, so Any
Figures: TypeAlias = dict[str, Any]
#: what a rule saw, label -> text, and the gain it projects in words
Wording: TypeAlias = tuple[dict[str, str], str]


def _launch_bound(f: Figures) -> Wording:
    window = "timed p50" if f["of_timed_p50"] else "step"
    evidence = {
        "GPU idle": f"{percent(f['idle_share'], 0, of_one=True)} of the {window} "
        f"({with_unit(f['step_ms'], 'ms')}; "
        f"kernels {with_unit(f['kernel_ms_per_step'], 'ms')} per step)",
        "idle in the profiled step": percent(f["profiled_idle_share"], 0, of_one=True),
    }
    if f["kernels_per_step"]:
        evidence["kernel launches per step"] = number(f["kernels_per_step"], 0, thousands=False)
    projected = f.get("projected_speedup") or 1 / max(1e-6, 1 - f["idle_share"])
    return evidence, (
        f"estimate {ratio(projected)} (latency / GPU time): the p50 "
        f"with every launch gap removed and the kernels unchanged would be "
        f"{with_unit(f['p50_floor_ms'], 'ms')}; backends that fuse kernels can beat it"
    )


def _fp32_cuda_cores(f: Figures) -> Wording:
    evidence = {
        "GEMM/conv share of kernel time": percent(f["matrix_share"], 0, of_one=True),
        "in Tensor Core kernels": percent(f["tensor_core_share"], 0, of_one=True),
        "GPU": f"{f['gpu']} (compute capability {f['compute_capability']})",
    }
    if not f.get("projected_speedup"):
        return evidence, (
            f"GEMM/conv time ({percent(f['matrix_share'], 0, of_one=True)} of kernel time) runs at "
            "Tensor Core rates (no datasheet row for this GPU: no projection)"
        )
    return evidence, (
        f"estimate {ratio(f['projected_speedup'])} on kernel time: the GEMM/conv "
        f"share ({percent(f['matrix_share'], 0, of_one=True)}) at the datasheet's dense FP16:FP32 "
        f"ratio ({ratio(f['dense_ratio_fp16'], 1)}; TF32:FP32 "
        f"{ratio(f['dense_ratio_tf32'], 1)}), the rest unchanged"
    )


def _low_occupancy(f: Figures) -> Wording:
    evidence = {
        f"top kernels (not Tensor Core GEMM/conv) under {percent(f['below_pct'], 0)} achieved "
        "occupancy": f"{f['low_kernels']} of {f['top_kernels']} profiled",
        "their share of kernel time": percent(f["share"], 0, of_one=True),
        "largest": f"{f['largest'][:60]} ({f['largest_category']}, "
        f"{percent(f['largest_occupancy_pct'], 0)})",
    }
    return evidence, (
        f"bounded by their {percent(f['share'], 0, of_one=True)} of kernel time; more warps help "
        "only where they hide memory latency"
    )


def _batch_headroom(f: Figures) -> Wording:
    evidence = {
        "throughput": ", ".join(f"bs{bs} {count(rate, 0)}/s" for bs, rate in f["throughput_by_bs"]),
        "last step": (
            f"+{percent(f['growth'], 0, of_one=True)} from bs{f['from_bs']} to bs{f['to_bs']}"
        ),
    }
    return evidence, (
        f"estimate {ratio(f.get('projected_speedup', 1 + f['growth']))} in "
        f"throughput: it still rose {percent(f['growth'], 0, of_one=True)} at the largest batch; "
        "latency per batch grows with it"
    )


def _trt_fp32_layers(f: Figures) -> Wording:
    evidence = {"layers with FP32 outputs": f"{f['fp32_layers']} of {f['layers']}"}
    if f["pytorch_layers"]:
        evidence["layers run by PyTorch"] = str(f["pytorch_layers"])
    return evidence, "up to the FP32 layers' share of engine time (see the layer view)"


def _memory_bound(f: Figures) -> Wording:
    evidence = {
        "arithmetic intensity": f"{number(f['intensity'], 0, thousands=False)} FLOP per "
        "minimum byte (ridge "
        f"{number(f['ridge'], 0, thousands=False)})",
        "achieved (minimum bytes / p50)": f"at least {count(f['achieved_gbs'], 0)} GB/s = "
        f"at least {percent(f['pct_of_bandwidth'], 0)} of {count(f['peak_gbs'], 0)} GB/s",
    }
    return evidence, (
        f"bound {ratio(f['speedup_bound'], 1)} (bytes at the measured bandwidth): "
        "the minimum bytes moved at full bandwidth; twice that for a switch to "
        "half precision"
    )


def _cpu(f: Figures) -> Wording:
    evidence = {"recorded on": "the CPU"}
    if f.get("cpu_bf16"):
        evidence["this machine's CPU flags"] = "BF16 (AVX-512 BF16 or AMX)"
    return evidence, "none projected: measure it (advise --try)"


#: rule id -> its figures in words (evidence by label, projected gain)
WORDING: dict[str, Callable[[Figures], Wording]] = {
    "cpu-backends": _cpu,
    "cpu-bf16": _cpu,
    "cpu-threads": _cpu,
    "launch-bound": _launch_bound,
    "fp32-cuda-cores": _fp32_cuda_cores,
    "low-occupancy": _low_occupancy,
    "batch-headroom": _batch_headroom,
    "trt-fp32-layers": _trt_fp32_layers,
    "memory-bound": _memory_bound,
}


def evidence(a: Advice) -> dict[str, str]:
    """What the rule saw, label -> text."""
    return WORDING[a.rule](a.figures)[0]


def projected_gain(a: Advice) -> str:
    """The gain the rule projects, with what the sweep measured for the action."""
    gain = WORDING[a.rule](a.figures)[1]
    if a.rule == "fp32-cuda-cores" and a.measured:
        gain += "; the sweep measured " + ", ".join(
            f"{k} {v.speedup}x" for k, v in a.measured.items()
        )
    return gain


def measured_line(a: Advice) -> str:
    """The sweep's p50 and speedup of each alternative the rule names ("" when none)."""
    return ", ".join(f"{k} p50 {v.p50_ms} ms ({v.speedup}x)" for k, v in a.measured.items())


def line(a: Advice) -> str:
    """The advice on one line: title, evidence, what to try, the gain."""
    facts = ", ".join(f"{k} {v}" for k, v in evidence(a).items())
    return f"{a.title}: {facts}. Try: {a.action}. Gain: {projected_gain(a)}"


def advice_record(a: Advice) -> AdviceRecord:
    """The advice as --json shows it (evidence and gain in words, measured as numbers)."""
    return AdviceRecord(
        rule=a.rule,
        title=a.title,
        action=a.action,
        evidence=evidence(a),
        projected_gain=projected_gain(a),
        projection=a.projection,
        source=a.source,
        measured=a.measured,
    )


def planned_advice(a: Advice, projected: float) -> PlannedAdvice:
    """advise's advice: with ``projected``, the speedup its experiments are ranked by, and its
    kind (both null when it is no speedup)."""
    speedup = projected > 1
    return PlannedAdvice(
        rule=a.rule,
        title=a.title,
        action=a.action,
        evidence=evidence(a),
        projected_gain=projected_gain(a),
        projection=a.projection if speedup else None,
        source=a.source,
        measured=a.measured,
        projected_speedup=projected if speedup else None,
    )


def noise_line(noise: BaselineNoise | None, of: str = "the run") -> str:
    """A baseline's noise (profiler.analysis.trial.baseline_noise) in one line: its timed
    window's CV with the window's flags, and the CV between its processes when it has several;
    "" without a record."""
    if not noise or noise.cv is None:
        return ""
    window = marked(f"CV {percent(100 * noise.cv)}", window_flags(noise.warnings))
    between = (
        f"between its {noise.processes} processes CV {percent(100 * noise.between_cv)}"
        if noise.between_cv is not None
        else "one process (no spread between processes measured)"
    )
    return f"noise of {of}: timed window {window}; {between}"
