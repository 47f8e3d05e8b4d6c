"""Damaged and oddly typed traces: odd fields never reject a whole trace (D13); impossible values
are left out of the figures and counted in one warning line (D16); unreadable and deeply nested
files are one-line errors (D11, D23). Inputs are real fixture traces edited in tmp_path."""

from __future__ import annotations

import gzip
import json
import warnings
from pathlib import Path

import pandas as pd
import pytest

from profiler.errors import UserError
from profiler.trace import file_bytes, load
from profiler.trace.summary import summarize

FIXTURE = (
    Path(__file__).parent
    / "fixtures"
    / "h200"
    / "tb_logs"
    / "pytorch_fp16_bs8"
    / "resnet50.1795313772163769478.pt.trace.json.gz"
)


@pytest.fixture(scope="module")
def clean():
    return load.load_trace(FIXTURE)


@pytest.fixture(scope="module")
def clean_summary():
    return summarize(FIXTURE)


def fixture_events() -> dict:
    return json.loads(gzip.decompress(FIXTURE.read_bytes()))


def write(tmp_path: Path, data, name: str = "t.pt.trace.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


def edit(tmp_path: Path, change, where) -> Path:
    """The fixture with ``change(event)`` applied to every event ``where(event)`` holds."""
    data = fixture_events()
    for event in data["traceEvents"]:
        if where(event):
            change(event)
    return write(tmp_path, data)


def is_kernel(event) -> bool:
    return event.get("cat") == "kernel"


def cat_is(*cats):
    return lambda event: event.get("cat") in cats


def set_arg(key, value):
    return lambda event: event.setdefault("args", {}).__setitem__(key, value)


def set_field(key, value):
    return lambda event: event.__setitem__(key, value)


def drop_field(key):
    return lambda event: event.pop(key, None)


# --------------------------------------------------------------------------------------------
# D13: an odd field type where the analyses do not need it changes nothing
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "change, where",
    [
        # ROCm (MI250) traces: runtime events carry the stream as a hex string
        (set_arg("stream", "0x0"), cat_is("cuda_runtime")),
        # Inductor/Triton: the launch records on CPU ops carry the grid as text
        (set_arg("grid", "grid(100,)"), cat_is("cpu_op")),
        (set_arg("device", "gpu"), cat_is("cpu_op", "user_annotation")),
        (set_arg("correlation", {"a": 1}), cat_is("cpu_op")),
        (set_arg("block", [[1], 2, 3]), cat_is("cuda_runtime")),
    ],
    ids=[
        "rocm-stream-string",
        "inductor-grid-string",
        "device-string",
        "correlation-object",
        "block-nested",
    ],
)
def test_odd_field_types_outside_kernels_keep_the_kernel_figures(tmp_path, clean, change, where):
    trace = load.load_trace(edit(tmp_path, change, where))
    assert trace.excluded == {}
    pd.testing.assert_frame_equal(
        trace.of_kind("kernel")[["name_id", "ts", "dur", "stream"]],
        clean.of_kind("kernel")[["name_id", "ts", "dur", "stream"]],
    )
    pd.testing.assert_frame_equal(trace.kernel_launch, clean.kernel_launch)
    assert len(trace.events) == len(clean.events)


def test_hex_string_stream_is_read_as_the_number(tmp_path, clean):
    trace = load.load_trace(edit(tmp_path, set_arg("stream", "0x7"), cat_is("cuda_runtime")))
    assert set(trace.of_kind("runtime")["stream"]) == {7}


def test_odd_launch_fields_on_kernels_read_as_absent(tmp_path, clean):
    path = edit(tmp_path, set_arg("grid", "abc"), is_kernel)
    trace = load.load_trace(path)
    assert (trace.kernel_launch["grid_x"] == 0).all()
    assert trace.of_kind("kernel")["dur"].sum() == clean.of_kind("kernel")["dur"].sum()


def test_items_that_are_not_events_and_odd_device_properties_are_skipped(tmp_path, clean):
    data = fixture_events()
    data["traceEvents"] += [1, "x", None, [2]]
    data["deviceProperties"] = "oops"
    trace = load.load_trace(write(tmp_path, data))
    assert len(trace.events) == len(clean.events)
    assert trace.devices == {}


# --------------------------------------------------------------------------------------------
# D16: impossible values are counted and left out, never summed
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "change, reason",
    [
        (drop_field("dur"), "missing or non-numeric ts/dur"),
        (drop_field("ts"), "missing or non-numeric ts/dur"),
        (set_field("dur", "12.5"), "missing or non-numeric ts/dur"),
        (set_field("dur", -5), "negative dur"),
        (set_field("dur", 1e308), "absurd dur (over a day)"),
        (set_field("dur", 10**30), "absurd dur (over a day)"),
        (set_field("ts", -1e18), "absurd ts"),
        (set_field("ts", 1e300), "absurd ts"),
    ],
)
def test_impossible_kernel_values_are_counted_and_left_out(tmp_path, clean, change, reason):
    n_kernels = len(clean.of_kind("kernel"))
    summary = summarize(edit(tmp_path, change, is_kernel))
    assert summary.excluded_events == {reason: n_kernels}
    assert summary.kernels.total_kernel_us == 0  # nothing of them summed
    assert summary.warning.startswith(f"{n_kernels} of {len(clean.events)} events left out")
    assert reason in summary.warning and "\n" not in summary.warning


def test_a_kernel_far_from_the_rest_of_the_trace_is_left_out(tmp_path, clean):
    data = fixture_events()
    kernel = next(e for e in data["traceEvents"] if is_kernel(e))
    kernel["ts"] += 3 * 86_400e6  # three days later
    trace = load.load_trace(write(tmp_path, data))
    assert trace.excluded == {"absurd ts (over a day from the rest)": 1}
    assert len(trace.of_kind("kernel")) == len(clean.of_kind("kernel")) - 1
    assert trace.span == clean.span


def test_duplicated_events_are_counted_once(tmp_path, clean_summary):
    data = fixture_events()
    n = len(data["traceEvents"])
    data["traceEvents"] = data["traceEvents"] * 2
    summary = summarize(write(tmp_path, data))
    assert summary.excluded_events["duplicated"] > 0
    assert summary.kernels.total_kernel_us == pytest.approx(clean_summary.kernels.total_kernel_us)
    assert summary.overview.mean_step_us == pytest.approx(clean_summary.overview.mean_step_us)
    assert n  # every event twice, figures as once


def test_negative_step_durations_do_not_make_negative_step_times(tmp_path):
    path = edit(
        tmp_path,
        set_field("dur", -1000),
        lambda e: str(e.get("name", "")).startswith("ProfilerStep"),
    )
    summary = summarize(path)
    assert summary.excluded_events == {"negative dur": 3}
    assert summary.overview.mean_step_us > 0


def test_kernel_launch_rows_follow_the_kept_events(tmp_path, clean):
    data = fixture_events()
    kernels = [e for e in data["traceEvents"] if is_kernel(e)]
    kernels[0]["dur"] = -1
    trace = load.load_trace(write(tmp_path, data))
    rows = trace.of_kind("kernel")
    assert list(rows.index) == list(trace.kernel_launch.index)
    assert len(rows) == len(clean.of_kind("kernel")) - 1


def test_a_clean_trace_has_no_exclusions(clean, clean_summary):
    assert clean.excluded == {} and clean_summary.warning is None


def test_summarize_prints_the_one_warning_line(tmp_path, cli):
    path = edit(tmp_path, set_field("dur", -5), is_kernel)
    done = cli("summarize", str(path), "--view", "overview")
    assert done.code == 0
    warnings = [line for line in done.stderr.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and "840 negative dur" in warnings[0], done.stderr
    assert "RuntimeWarning" not in done.stderr


def test_int_args_beyond_64_bits_read_as_absent(tmp_path):
    path = write(
        tmp_path,
        {
            "traceEvents": [
                {
                    "ph": "X",
                    "cat": "kernel",
                    "name": "k",
                    "pid": 0,
                    "tid": 7,
                    "ts": 1,
                    "dur": 5,
                    "args": {
                        "device": 0,
                        "stream": 7,
                        "correlation": 10**25,
                        "External id": -(10**25),
                    },
                }
            ]
        },
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no numpy cast warning either
        trace = load.load_trace(path)
    assert trace.events["correlation"].tolist() == [-1]
    assert trace.events["external_id"].tolist() == [-1]


# --------------------------------------------------------------------------------------------
# D11, D23: files that cannot be read or parsed are one line
# --------------------------------------------------------------------------------------------


def test_unreadable_file_is_one_line(tmp_path, monkeypatch):
    """chmod 000 does not stop root, so the refusal is stood in for at open()."""
    path = write(tmp_path, fixture_events())

    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(file_bytes, "open", refuse, raising=False)
    with pytest.raises(UserError, match="cannot read .*Permission denied"):
        load.load_trace(path)


def test_deeply_nested_json_is_one_line(tmp_path):
    path = tmp_path / "deep.json"
    path.write_bytes(b'{"traceEvents":[' + b"[" * 100_000 + b"]" * 100_000 + b"]}")
    with pytest.raises(UserError, match="nests JSON .* too deeply"):
        load.load_trace(path)
