"""Issue 22: what a trace holds is said as it is. Device events the loader does not read are
counted and named, never called a CPU-only profile; profiled steps that launch different kernels
are flagged. Each test edits a committed H200 trace (tests/fixtures/h200)."""

import gzip
import json

import pytest

from profiler.trace.load import load_trace
from profiler.trace.summary import summarize_trace

from .conftest import FIXTURES

H200_EAGER = next((FIXTURES / "h200" / "tb_logs" / "pytorch_fp16_bs8").glob("*.pt.trace.json.gz"))


@pytest.fixture(scope="module")
def raw():
    with gzip.open(H200_EAGER) as f:
        return json.load(f)


def _write(tmp_path, raw, events, name="edited.pt.trace.json"):
    path = tmp_path / name
    path.write_text(json.dumps(dict(raw, traceEvents=events)))
    return path


# ---- point 2: device events of a category the loader does not read ---------------------------


def test_unread_device_events_are_counted_and_named_not_called_cpu_only(tmp_path, raw):
    # the same trace as if another accelerator had written its device work: every kernel event
    # carries a category this tool does not read (libkineto's MTIA activity name), on device 0;
    # and its runtime calls, on the host, carry another unread category
    events, kernels = [], 0
    for e in raw["traceEvents"]:
        if e.get("ph") == "X" and e.get("cat") == "kernel":
            e, kernels = dict(e, cat="mtia_ccp_events"), kernels + 1
        elif e.get("ph") == "X" and e.get("cat") == "cuda_runtime":
            e = dict(e, cat="mtia_runtime")
        events.append(e)
    trace = load_trace(_write(tmp_path, raw, events))
    assert not trace.has_gpu_activity
    assert trace.unanalysed_device_events == [(kernels, "mtia_ccp_events", 0)]
    notes = " | ".join(summarize_trace(trace).notes)
    assert f"{kernels} events of category 'mtia_ccp_events' on device 0, not analysed" in notes
    assert "CPU-only" not in notes and "no GPU activity was recorded" not in notes
    assert "mtia_runtime" not in notes  # host-side calls are not device events


def test_unread_device_events_beside_cuda_ones_are_named_too(tmp_path, raw):
    extra = [
        {
            "ph": "X",
            "cat": "mtia_ccp_events",
            "name": "mtia_kernel",
            "pid": 1,
            "tid": 7,
            "ts": 1.0e6 + i,
            "dur": 1.0,
        }
        for i in range(3)
    ]
    trace = load_trace(_write(tmp_path, raw, raw["traceEvents"] + extra))
    assert trace.has_gpu_activity
    notes = summarize_trace(trace).notes
    assert any(
        "3 events of category 'mtia_ccp_events' on device 1, not analysed" in n for n in notes
    ), notes


def test_a_cuda_trace_has_no_unread_device_events():
    trace = load_trace(H200_EAGER)
    assert trace.unread == {} and trace.unanalysed_warning is None


# ---- point 6: profiled steps that launch different kernels -----------------------------------


def _kernel_events_by_step(raw):
    """The kernel events of each profiled step of the unedited trace (as the analysis splits
    them), each step's list of raw events."""
    from profiler.trace.kernels import kernel_rows

    trace = load_trace(H200_EAGER)
    steps = summarize_trace(trace).overview.steps
    rows = kernel_rows(trace)
    kernels = [e for e in raw["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "kernel"]
    assert len(kernels) == len(rows)
    by_step = []
    for start, end in zip(steps["start"], steps["end"]):
        by_step.append([e for e in kernels if start <= e["ts"] < end])
    return list(steps["step"]), by_step


def _dropped(raw, drop):
    ids = {id(e) for e in drop}
    return [e for e in raw["traceEvents"] if id(e) not in ids]


def test_steps_that_lost_kernels_are_flagged_with_counts(tmp_path, raw):
    steps, by_step = _kernel_events_by_step(raw)
    counts = [len(k) for k in by_step]
    assert len(set(counts)) == 1  # the fixture's steps agree: nothing to flag
    assert summarize_trace(load_trace(H200_EAGER)).warnings == []
    # drop the middle step's first 5 kernels, as a full activity buffer would
    lost = by_step[1][:5]
    lost_names = {e["name"] for e in lost}
    once = {n for n in lost_names if sum(e["name"] == n for e in by_step[1]) == 1}
    trace = load_trace(_write(tmp_path, raw, _dropped(raw, lost)))
    warnings = summarize_trace(trace).warnings
    assert len(warnings) == 1, warnings
    n = counts[0]
    per_step = (
        f"{n} in step {steps[0].removeprefix('ProfilerStep')}, {n - 5} in step "
        f"{steps[1].removeprefix('ProfilerStep')}, {n} in step "
        f"{steps[2].removeprefix('ProfilerStep')}"
    )
    assert f"profiled steps launched different kernels: {per_step}" in warnings[0]
    if once:
        assert f"{len(once)} kernel name(s) ran in some steps only" in warnings[0]
        assert f"(2 of {len(steps)})" in warnings[0]


def test_steps_against_an_untraced_call(tmp_path, raw):
    from collections import Counter

    from profiler.trace.rules import RunContext

    steps, by_step = _kernel_events_by_step(raw)
    untraced = dict(Counter(e["name"] for e in by_step[0]))
    same = summarize_trace(load_trace(H200_EAGER), RunContext(untraced_kernels=untraced))
    assert same.warnings == []
    # the untraced call ran a kernel the profiled steps never show
    more = dict(untraced, **{"void hidden_kernel<float>(float*)": 2})
    warnings = summarize_trace(load_trace(H200_EAGER), RunContext(untraced_kernels=more)).warnings
    assert len(warnings) == 1
    total = sum(untraced.values())
    assert (
        f"an untraced call of this run launched {total + 2} kernels of {len(more)} names"
        in warnings[0]
    )
    assert (
        "1 of the untraced call's kernel name(s) never ran in a profiled step: hidden_kernel"
        in warnings[0]
    )
    # and every step of an edited trace differs from it
    edited = load_trace(_write(tmp_path, raw, _dropped(raw, [k[0] for k in by_step])))
    warnings = summarize_trace(edited, RunContext(untraced_kernels=untraced)).warnings
    assert any(
        w.startswith(f"an untraced call of this run launched {total} kernels")
        and f"{total - 1} in step" in w
        for w in warnings
    ), warnings


def test_summarize_prints_the_untraced_comparison_of_a_run(tmp_path, raw, cli):
    """A run folder whose result.json holds ``trace.untraced_kernels``: summarize warns."""
    import shutil

    source = FIXTURES / "h200"
    shutil.copytree(source / "runs" / "pytorch_fp16_bs8", tmp_path / "runs" / "pytorch_fp16_bs8")
    shutil.copytree(
        source / "tb_logs" / "pytorch_fp16_bs8", tmp_path / "tb_logs" / "pytorch_fp16_bs8"
    )
    result = tmp_path / "runs" / "pytorch_fp16_bs8" / "result.json"
    data = json.loads(result.read_text())
    data["trace"]["untraced_kernels"] = {"void hidden_kernel<float>(float*)": 1}
    result.write_text(json.dumps(data))
    done = cli("summarize", "pytorch_fp16_bs8", "--view", "overview")  # from tmp_path
    assert done.code == 0, done.stderr
    assert "warning: an untraced call of this run launched 1 kernels of 1 names" in done.stderr


def test_the_untraced_call_counts_kernel_records_only():
    """collect.untraced: the kernel records of the one call's exported trace, by name; memcpy,
    memset, runtime and CPU records left out, as the trace's kernel table leaves them out."""
    from profiler.collect.untraced import kernel_counts, why_not

    gemm = "nvjet_sm90_hsh_64x8_64x16_4x1_v_bz_bias_TNT"
    reduce = "void at::native::reduce_kernel<512, 1>()"
    trace = {
        "traceEvents": [
            {"ph": "X", "cat": "kernel", "name": gemm},
            {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pageable -> Device)"},
            {"ph": "X", "cat": "kernel", "name": reduce},
            {"ph": "X", "cat": "kernel", "name": gemm},
            {"ph": "X", "cat": "gpu_memset", "name": "Memset (Device)"},
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel"},
            {"ph": "f", "cat": "kernel", "name": gemm},
            "not an event",
        ]
    }
    assert kernel_counts(trace) == {gemm: 2, reduce: 1}
    assert kernel_counts({}) == {}
    assert why_not(False, "torch") == "no CUDA device (no kernels)"
    assert "outside profiler" in why_not(True, "cuda-profiler-api")
    assert why_not(True, "torch") is None
