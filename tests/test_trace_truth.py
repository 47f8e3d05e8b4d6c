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
    extra = [{"ph": "X", "cat": "mtia_ccp_events", "name": "mtia_kernel", "pid": 1, "tid": 7,
              "ts": 1.0e6 + i, "dur": 1.0} for i in range(3)]
    trace = load_trace(_write(tmp_path, raw, raw["traceEvents"] + extra))
    assert trace.has_gpu_activity
    notes = summarize_trace(trace).notes
    assert any("3 events of category 'mtia_ccp_events' on device 1, not analysed" in n
               for n in notes), notes


def test_a_cuda_trace_has_no_unread_device_events():
    trace = load_trace(H200_EAGER)
    assert trace.unread == {} and trace.unanalysed_warning is None
