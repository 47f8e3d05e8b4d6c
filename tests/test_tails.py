"""A window's tail percentiles with distribution-free intervals (profiler.analysis.tails): the
order-statistic ranks against the binomial sums written out, their coverage on seeded draws,
what a window too small for p99 says, and where the views show them. Nothing is timed."""

import json
import math
import random
import shutil

import pytest

from profiler.analysis.headline import window_tails
from profiler.analysis.tails import (
    binomial_cdf,
    iterations_needed,
    order_ranks,
    tail_figure,
    tail_figures,
)
from profiler.report.sentences import ordinal, tail_meaning, tail_rank, tail_value
from profiler.runs.result import read_result

from .conftest import FIXTURES

RUN = FIXTURES / "h100_ncu_fp16" / "runs" / "pytorch_fp16_bs8"


def _cdfs(n: int, q: float) -> list[float]:
    """P(B <= k) for k = 0..n, the binomial terms summed in order (exact sums, no beta)."""
    total, out = 0.0, []
    for i in range(n + 1):
        log_term = (
            math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1)
            + i * math.log(q) + (n - i) * math.log1p(-q)
        )  # fmt: skip
        total += math.exp(log_term)
        out.append(total)
    return out


@pytest.mark.parametrize(
    "n, q", [(100, 0.9), (100, 0.99), (367, 0.99), (368, 0.99), (1000, 0.99), (35, 0.9), (36, 0.9)]
)
def test_the_ranks_are_the_equal_tailed_order_statistics_of_the_binomial(n, q):
    cdf = _cdfs(n, q)
    for k in (0, n // 2, round(q * n) - 1, n - 1):
        assert binomial_cdf(k, n, q) == pytest.approx(cdf[k], abs=1e-12)
    low = max((r for r in range(1, n + 1) if cdf[r - 1] <= 0.025), default=None)
    high = min((r for r in range(1, n + 1) if cdf[r - 1] >= 0.975), default=None)
    assert order_ranks(n, q) == (low, high)
    # an upper end from exactly the iterations_needed on
    assert (high is not None) == (n >= iterations_needed(q))


def test_p90_of_100_has_both_ends_and_p99_of_100_has_no_upper_end():
    assert order_ranks(100, 0.9) == (84, 96)
    assert order_ranks(100, 0.99) == (97, None)
    assert (iterations_needed(0.9), iterations_needed(0.99)) == (36, 368)
    values = [float(v) for v in range(1, 101)]  # the i-th smallest is i
    p90, p99 = tail_figures(values)
    assert (p90.low_ms, p90.high_ms, p90.coverage >= 0.95) == (84.0, 96.0, True)
    assert (p99.low_ms, p99.high_ms, p99.needed) == (97.0, None, 368)
    assert p99.value_ms == pytest.approx(99.01)  # numpy's linear interpolation
    assert tail_rank(p99) == "the 99th of 100 values"
    assert tail_value(p99) == "99.01 ms [97.00-?]"  # four figures without a CV
    assert tail_value(p99, 0.2) == "99 ms [97-?]"  # two at a CV of 20 %
    assert tail_meaning(p99) == (
        "p99 of 100 iterations is the 99th of 100 values: too few for its 95 % interval, "
        "which runs from the 97th value up, with no upper end among them; 368 iterations give "
        "both ends"
    )
    assert tail_meaning(p90) == (
        "95 % interval: the 84th to 96th of 100 values (order statistics, no shape assumed)"
    )
    enough = tail_figure([float(v) for v in range(400)], 99)
    assert enough.low_ms is not None and enough.high_ms is not None
    assert tail_figures([]) == []
    assert [ordinal(n) for n in (1, 2, 3, 11, 12, 13, 21, 22, 101)] == [
        "1st", "2nd", "3rd", "11th", "12th", "13th", "21st", "22nd", "101st"
    ]  # fmt: skip


def test_the_interval_holds_the_true_percentile_at_least_95_percent_of_the_time():
    """Exponential draws (a skewed tail, as latencies have): the true p90 is ln(10)."""
    rng = random.Random(7)
    truth, trials = math.log(10), 800
    held = 0
    for _ in range(trials):
        t = tail_figure([rng.expovariate(1.0) for _ in range(100)], 90)
        held += t.low_ms <= truth <= t.high_ms
    assert held / trials >= 0.93  # at least 0.95 in expectation; 800 trials: sd 0.8 %


def test_the_headline_carries_the_tails_of_the_runs_window_and_the_views_show_them(cli):
    result = read_result(RUN / "result.json")
    tails = window_tails(result, RUN / "result.json")
    assert [t.percentile for t in tails] == [90, 99]
    # the recorded p90 and p99 are the same figures, read from the same window
    assert tails[0].value_ms == pytest.approx(result.timing.p90_ms)
    assert tails[1].value_ms == pytest.approx(result.timing.p99_ms)
    assert tails[0].low_ms <= tails[0].value_ms <= tails[0].high_ms
    assert tails[1].high_ms is None and tails[1].iterations == result.timing.iters == 100
    done = cli("summarize", str(RUN), "--view", "overview")
    assert done.code == 0, done.stderr
    text = " ".join(done.stdout.split())
    cv = result.timing.noise.cv  # 62 %: two figures
    assert tail_value(tails[0], cv).startswith(f"{result.timing.p90_ms:.1f} ms [")
    assert f"p90 latency │ {tail_value(tails[0], cv)} │ 95 % interval: the 84th to 96th" in text
    assert "p99 of 100 iterations is the 99th of 100 values: too few for its 95 %" in text
    data = json.loads(cli("summarize", str(RUN), "--json").stdout)
    assert [t["percentile"] for t in data["headline"]["tails"]] == [90, 99]
    assert data["headline"]["tails"][1]["high_ms"] is None


def test_the_run_view_and_compare_say_where_a_window_is_too_small(tmp_path, monkeypatch, cli):
    from profiler.analysis.result_analysis import ResultAnalysis
    from profiler.report.run_view import tails_line

    shutil.copytree(RUN.parent, tmp_path / "runs")
    monkeypatch.chdir(tmp_path)  # result.json names its latency.csv from where the run ran
    tails = ResultAnalysis(read_result(tmp_path / "runs" / RUN.name / "result.json")).tails
    assert tails is not None
    line = tails_line(tails)
    assert line.startswith("tails, 95 % intervals from order statistics: p90 ")
    assert line.endswith(
        "; p99 of 100 iterations is the 99th of 100 values, too few for both ends of its "
        "interval (368 give them)"
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert ResultAnalysis(read_result(RUN / "result.json")).tails is None  # no latency.csv there
    runs = FIXTURES / "h200" / "runs"
    done = cli(
        "compare", str(runs / "pytorch_fp16_bs8"), str(runs / "ttrt_fp16_bs8"), "--view", "timed"
    )
    assert done.code == 0, done.stderr
    assert "│ p99 latency (100 iterations: no 95 % interval; 368 give one) │" in done.stdout
    assert "│ p90 latency │" in " ".join(done.stdout.split())
