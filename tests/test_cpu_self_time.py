"""CPU self time follows torch.profiler: an operator's range less every range nested in it on its
thread, its CUDA runtime and driver calls included (torch.profiler makes those calls children of
the operator; ``self_cpu_time_total = cpu_time_total - sum(children's cpu_time_total)``). The
TensorBoard plugin's "Host Self Duration" subtracts its runtime calls the same way
(``OperatorNode.fill_stats``). Checked on committed real traces against a recomputation from the
raw events."""

import gzip
import json
from collections import defaultdict

import pytest

from profiler.trace.summary import summarize

from .conftest import FIXTURES

H200_EAGER = next((FIXTURES / "h200" / "tb_logs" / "pytorch_fp16_bs8").glob("*.pt.trace.json.gz"))
# Inductor: Triton kernels launched by cuLaunchKernel (cuda_driver events)
H200_INDUCTOR = next(
    (FIXTURES / "h200_ncu" / "tb_logs" / "inductor_fp16_bs8").glob("*.pt.trace.json.gz")
)
OPERATORS = {"cpu_op", "user_annotation"}
CALLS = {"cuda_runtime", "cuda_driver"}


def self_time_by_name(path, nested_kinds):
    """Per operator name: the summed self time, computed the way torch.profiler's
    EventList._populate_cpu_children does it, one thread at a time with a stack of open
    ranges. ``nested_kinds``: the categories whose ranges count as children."""
    with gzip.open(path) as f:
        events = [
            e
            for e in json.load(f)["traceEvents"]
            if e.get("ph") == "X" and e.get("cat") in OPERATORS | nested_kinds
        ]
    by_thread = defaultdict(list)
    for e in events:
        by_thread[(e["pid"], e["tid"])].append(e)
    totals = defaultdict(float)
    for thread in by_thread.values():
        thread.sort(key=lambda e: (e["ts"], -e["dur"]))
        children = defaultdict(float)  # id(parent) -> summed child durations
        stack = []
        for e in thread:
            while stack and e["ts"] >= stack[-1]["ts"] + stack[-1]["dur"]:
                stack.pop()
            if stack and e["ts"] + e["dur"] <= stack[-1]["ts"] + stack[-1]["dur"]:
                children[id(stack[-1])] += e["dur"]
            stack.append(e)
        for e in thread:
            if e["cat"] in OPERATORS and not e["name"].startswith("ProfilerStep#"):
                totals[e["name"]] += max(e["dur"] - children[id(e)], 0.0)
    return totals


@pytest.mark.parametrize("trace", [H200_EAGER, H200_INDUCTOR], ids=["eager", "inductor"])
def test_cpu_self_time_leaves_out_runtime_and_driver_calls(trace):
    expected = self_time_by_name(trace, CALLS)
    assert expected != self_time_by_name(trace, {"cuda_runtime"})  # driver calls nest too
    table = summarize(trace).overview.operators.set_index("operator")
    for name, self_us in expected.items():
        assert table.loc[name, "cpu_self_us"] == pytest.approx(self_us, abs=0.01), name


def test_the_runtime_calls_make_the_difference():
    """On the H200 eager trace the launch calls are most of an operator's own time: counting
    them in (the definition before) gives another, larger figure."""
    table = summarize(H200_EAGER).overview.operators.set_index("operator")
    with_calls = self_time_by_name(H200_EAGER, set())
    name = "aten::native_batch_norm"
    assert table.loc[name, "cpu_self_us"] == pytest.approx(2709.03, abs=0.01)
    assert with_calls[name] == pytest.approx(4979.17, abs=0.01)
