"""advise's projections against every committed measurement: what is called a bound holds
(measured speedup <= bound), and what cannot be one is called an estimate.

Measurements: the H200 fixture runs (tests/fixtures/h200, their timed p50s) with the warm sweep
measured beside them (docs/sweep/warm/benchmark.csv), and every `advise --try` row of the H100
logs (docs/gpu/h100/advise/all.log)."""

import re

import pytest

from profiler.analysis.experiments import projection, promise
from profiler.analysis.trial import judge
from profiler.report.trial_view import judgement_text

from .conftest import ROOT
from .test_roofline_advice import WARM, _evidence, _fired, _result

LOG = (ROOT / "docs" / "gpu" / "h100" / "advise" / "all.log").read_text()
ROW = re.compile(
    r"^- (.+?): projected up to ([\d.]+)x, measured ([\d.]+)x \[([\d.]+)-([\d.]+)\]", re.M
)


def _p50(run: str) -> float:
    return float(_result(run).timing.p50_ms)


#: (baseline run, run of the change, the change, the rules that name it, the run's config)
H200_CHANGES = [
    ("pytorch_fp16_bs8", "ttrt_fp16_bs8", {"backend": "ttrt_fp16"}),
    ("pytorch_fp16_bs8", "inductor_fp16_bs8", {"backend": "inductor_fp16"}),
    ("pytorch_fp16_bs8", "inductor_fp16_bs8_maxautotune", {"backend": "inductor_fp16"}),
    ("pytorch_fp32_bs8", "pytorch_fp16_bs8", {"backend": "pytorch_fp16"}),
    ("inductor_fp16_bs8", "ttrt_fp16_bs8", {"backend": "ttrt_fp16"}),
]


def test_the_launch_bound_projection_is_an_estimate_the_h200_runs_beat():
    """TensorRT 7.25x and Inductor max-autotune 5.63x against latency / GPU time = 5.35x."""
    advice = _fired(_evidence("pytorch_fp16_bs8", sweep=WARM))["launch-bound"]
    assert advice.projection == "estimate"
    projected = promise(advice, {"backend": "ttrt_fp16"})
    assert round(projected, 2) == 5.35
    ttrt = _p50("pytorch_fp16_bs8") / _p50("ttrt_fp16_bs8")
    maxautotune = _p50("pytorch_fp16_bs8") / _p50("inductor_fp16_bs8_maxautotune")
    assert ttrt == pytest.approx(7.25, abs=0.005)
    assert maxautotune == pytest.approx(5.63, abs=0.006)
    judged = judge(projected, "faster", ttrt, ttrt * 0.9, ttrt * 1.1, advice.projection)
    assert (judged.outcome, judged.projection) == ("above", "estimate")
    said = judgement_text(judged)
    assert "estimate" in said and "exceeded the estimate" in said
    assert "bound" not in said and "within" not in said


@pytest.mark.parametrize("base, changed, changes", H200_CHANGES)
def test_every_h200_bound_holds_and_the_rest_are_estimates(base, changed, changes):
    fired = list(_fired(_evidence(base, sweep=WARM)).values())
    measured = _p50(base) / _p50(changed)
    config = {"backend": base.rsplit("_", 1)[0], "batch_size": 8}
    value, kind = projection(fired, [a.rule for a in fired], changes, config)
    assert value is not None
    assert kind in ("bound", "estimate")
    if kind == "bound":
        assert measured <= value, (base, changed, measured, value)
    for a in fired:  # the sweep's measured alternatives against each rule's own figure
        for name, cell in a.measured.items():
            if a.projection == "bound":
                assert cell.speedup <= promise(a, {"backend": name}, config)


def test_the_memory_bound_bound_holds_on_the_warm_sweep():
    """TensorRT FP32 (TF32) at bs 1 is memory-bound on the H200: the bound (bytes at the
    bandwidth, twice for FP16's half bytes) is above what every other bs 1 cell measured."""
    from profiler.analysis.advice import Evidence, advise
    from profiler.analysis.roofline import datasheet_ceilings, run_roofline

    from .test_roofline_advice import FLOPS

    bs1 = WARM[(WARM["bs"] == 1) & (WARM["status"] == "ok")].set_index("backend")["p50_ms"]
    r = run_roofline(
        FLOPS["roofline_inputs"]["fp32_bs1"],
        float(bs1["ttrt_fp32"]),
        datasheet_ceilings("NVIDIA H200"),
        "tf32",
    )
    (a,) = [
        x
        for x in advise(Evidence(backend="ttrt_fp32", precision="fp32", roofline=r))
        if x.rule == "memory-bound"
    ]
    assert a.projection == "bound"
    config = {"backend": "ttrt_fp32", "batch_size": 1}
    for backend, p50 in bs1.items():
        assert float(bs1["ttrt_fp32"]) / p50 <= promise(a, {"backend": backend}, config)


def test_every_h100_advise_try_row_against_its_projection():
    """The logged rows were projected before the formulas were written beside the rules; the
    present formulas give each experiment at least that figure (FP16 at 14.8x, not 8x; FP16's
    bytes halved), so a row within its logged figure is within the present one. The one row
    above its figure is --cuda-graphs, whose only rule (launch-bound) is an estimate."""
    from profiler.analysis.experiments import EXPERIMENTS

    rows = ROW.findall(LOG)
    assert len(rows) == 10
    above = [(label, float(p), float(s)) for label, p, s, _, _ in rows if float(s) > float(p)]
    assert above == [("--cuda-graphs", 6.37, 6.40)]
    config = {"backend": "pytorch_fp16", "batch_size": 1, "workload": "forward"}
    naming = [
        rule
        for rule, make in EXPERIMENTS.items()
        if any(label == "--cuda-graphs" for label, _, _ in make(config))
    ]
    assert naming == ["launch-bound"]
    advice = _fired(_evidence("pytorch_fp16_bs8"))["launch-bound"]
    assert advice.projection == "estimate"
    judged = judge(6.37, "faster", 6.40, 4.65, 8.81, advice.projection)
    assert judged.outcome == "exceeded" and judged.projected == 6.37
    assert judgement_text(judged) == (
        "projected estimate 6.37x, measured 6.40x [4.65-8.81]: faster; the measured "
        "speedup exceeded the estimate (its interval reaches below it)"
    )


def test_within_the_bound_only_when_it_is():
    within = judge(4.0, "faster", 3.0, 2.5, 3.5, "bound")
    assert within.outcome == "within"
    assert judgement_text(within).endswith("faster, within the bound")
    beyond = judgement_text(judge(4.0, "faster", 5.0, 4.5, 5.5, "bound"))
    assert "within" not in beyond and "exceeded the bound" in beyond
    assert "did not hold" in beyond
    assert "within" not in judgement_text(judge(4.0, "faster", 3.0, 2.5, 3.5, "estimate"))
