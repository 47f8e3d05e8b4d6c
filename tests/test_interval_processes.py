"""Every interval says how many processes it spans; one process a side says it is within one
window, and no verdict is drawn from that window's spread (the between-process floor stands in:
a ratio of 1.000 is undecided, never "the same"). The figures are the H100 ones of
docs/gpu/h100/reproduce/features.log (1 vs 1 process, B/A 1.000) and the per-process medians of
fresh H100 processes of docs/gpu/h100/verdicts/jitter_raw.json.gz (eager FP16 bs 1, "as today")."""

import gzip
import json
import statistics

import msgspec

from profiler.analysis.trial import judge
from profiler.analysis.verdict import compare
from profiler.report.compare_view import verdict_basis
from profiler.report.trial_view import judgement_text

from .conftest import ROOT

RAW = ROOT / "docs" / "gpu" / "h100" / "verdicts" / "jitter_raw.json.gz"


def _medians() -> list[float]:
    """The per-process medians of eager FP16 bs 1, one per fresh process."""
    with gzip.open(RAW) as raw:
        data = json.loads(raw.read())
    return [
        statistics.median(p["records"]["fp16_bs1"]["latencies_ms"])
        for p in data["processes"]["as today"]
    ]


def test_one_process_a_side_is_within_one_window_and_draws_no_verdict_from_it():
    v = compare([6.082], [6.082])  # one window each, the same median
    assert v.verdict == "undecided"  # the floor stands in: never "same" from one window
    text = verdict_basis(v)
    assert "95 % interval" in text and "over 1 vs 1 process" in text
    assert "within one window a side" in text
    # the JSON carries the counts beside the interval
    data = json.loads(msgspec.json.encode(v))
    assert (data["processes_a"], data["processes_b"], data["design"]) == (1, 1, "floor")
    one = judgement_text(judge(None, v.verdict, 1.0, 1 / v.high, 1 / v.low, None, (1, 1)))
    assert "over 1 vs 1 processes, within one window a side" in one


def test_several_processes_are_counted_and_not_called_one_window():
    medians = _medians()
    assert len(medians) >= 2
    v = compare(medians, [m / 2 for m in medians])
    text = verdict_basis(v)
    n = len(medians)
    assert f"over {n} vs {n} processes" in text and "window" not in text
    several = judgement_text(judge(2.0, v.verdict, 2.0, 1.9, 2.1, "estimate", (n, n)))
    assert f"over {n} vs {n} processes" in several and "window" not in several
