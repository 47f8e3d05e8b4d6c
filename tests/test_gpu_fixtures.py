"""The committed H200 run folders are consistent with what the harness computes from them."""

import csv
import json
from pathlib import Path

import pytest

from profiler.analysis.timed_window import TimedWindow
from tests.conftest import FIXTURES

RUNS = sorted((FIXTURES / "h200" / "runs").iterdir())


@pytest.mark.parametrize("run", RUNS, ids=lambda p: p.name)
def test_statistics_recompute_from_latency_csv(run: Path):
    result = json.loads((run / "result.json").read_text())
    with open(run / "latency.csv") as handle:
        latencies = [float(row["latency_ms"]) for row in csv.DictReader(handle)]
    assert len(latencies) == result["timing"]["iters"]
    again = TimedWindow(tuple(latencies), result["batch_size"]).stats
    for key, value in again.items():
        assert result["timing"][key] == pytest.approx(value, rel=1e-5), key
    assert result["timing"]["timer"] == "cuda_event"
    assert result["environment"]["gpu"]["name"] == "NVIDIA H200"
    assert result["precision"]["tf32"] is False
    # the trace the result names is the one committed beside it
    trace = Path(result["trace"]["files"][0])
    assert (FIXTURES / "h200" / trace).is_file()
