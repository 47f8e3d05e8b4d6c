"""A folder of rank traces: ranks by their recorded rank, missing ranks and steps said, the
TensorBoard plugin's Distributed view figures (equal to the plugin's own, driven in-process),
this tool's figures against plain interval unions, the straggler, and two runs compared."""

import gzip
import json
import shutil

import pytest

from profiler.analysis.rank_run import RankComparison, RankRun, rank_folder, spans
from profiler.errors import UserError
from profiler.trace.load import load_trace
from profiler.trace.ranks import distributed_info, rank_steps

from .conftest import FIXTURES

HTA = FIXTURES / "hta_ranks"
RANK0, RANK1 = HTA / "sampled_rank-0.json.gz", HTA / "sampled_rank-1.json.gz"
GLOO = FIXTURES / "ranks_gloo_cpu"
GLOO_RUN = GLOO / "runs" / "pytorch_fp32_bs1_llama-tiny_gen_tp2"
GLOO_TRACES = GLOO / "tb_logs" / "pytorch_fp32_bs1_llama-tiny_gen_tp2"
GLOO0 = next(GLOO_TRACES.glob("*.rank0.*.pt.trace.json.gz"))
GLOO1 = next(GLOO_TRACES.glob("*.rank1.*.pt.trace.json.gz"))


def _json(path):
    return json.loads(gzip.decompress(path.read_bytes()))


def _write(path, data):
    path.write_bytes(gzip.compress(json.dumps(data).encode()))


def test_distributed_info_is_read_from_the_head():
    info = distributed_info(RANK1)
    assert (info.rank, info.world_size, info.backend) == (1, 128, "nccl")
    assert (
        distributed_info(FIXTURES / "kineto_tb_plugin" / "worker0.1623143089861.pt.trace.json.gz")
        is None
    )


def test_ranks_are_ordered_by_recorded_rank_not_file_name(tmp_path):
    shutil.copy(RANK1, tmp_path / "a_first.json.gz")  # rank 1 sorts first by name
    shutil.copy(RANK0, tmp_path / "b_second.json.gz")
    found = rank_folder(str(tmp_path))
    assert [info.rank for _, info in found] == [0, 1]
    assert [p.name for p, _ in found] == ["b_second.json.gz", "a_first.json.gz"]
    figures = RankRun(str(tmp_path)).figures
    assert [r.rank for r in figures.per_rank] == [0, 1]
    assert figures.per_rank[0].trace.endswith("b_second.json.gz")


def test_missing_ranks_are_named():
    figures = RankRun(str(HTA)).figures
    assert figures.world_size == 128
    assert figures.ranks == [0, 1]
    assert figures.missing_ranks == list(range(2, 128))
    assert any("ranks 2-127 missing" in note for note in figures.notes)
    assert spans([0, 1, 3, 5, 6, 7]) == "0-1, 3, 5-7"


def test_a_missing_middle_rank_is_named(tmp_path):
    """Ranks 0 and 1 of a world of 4, recorded as 0 and 3: rank 1 and 2 are missing."""
    _write(
        tmp_path / "r0.json.gz",
        {**_json(RANK0), "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 4}},
    )
    _write(
        tmp_path / "r3.json.gz",
        {**_json(RANK1), "distributedInfo": {"backend": "nccl", "rank": 3, "world_size": 4}},
    )
    figures = RankRun(str(tmp_path)).figures
    assert figures.ranks == [0, 3]
    assert figures.missing_ranks == [1, 2]
    assert any("ranks 1-2 missing" in note for note in figures.notes)


def test_different_step_counts_use_the_common_steps(tmp_path):
    shutil.copy(RANK0, tmp_path / "rank0.json.gz")
    data = _json(RANK1)
    data["traceEvents"] = [e for e in data["traceEvents"] if e.get("name") != "ProfilerStep#552"]
    _write(tmp_path / "rank1.json.gz", data)
    figures = RankRun(str(tmp_path)).figures
    assert figures.common_steps == ["ProfilerStep#551"]
    assert [r.steps for r in figures.per_rank] == [2, 1]
    assert [r.steps_used for r in figures.per_rank] == [1, 1]
    note = next(n for n in figures.notes if "different steps" in n)
    assert "rank 0: 2, rank 1: 1" in note and "1 step(s) all hold" in note
    rank0 = [s for s in figures.per_step if s.rank == 0]
    assert figures.per_rank[0].step_ms == pytest.approx(rank0[0].step_ms)
    assert figures.straggler.steps == 1


def test_two_traces_of_one_rank_are_refused(tmp_path):
    shutil.copy(RANK0, tmp_path / "a.json.gz")
    shutil.copy(RANK0, tmp_path / "b.json.gz")
    shutil.copy(RANK1, tmp_path / "c.json.gz")
    with pytest.raises(UserError, match="2 traces of rank 0"):
        rank_folder(str(tmp_path))


def test_a_folder_of_traces_without_ranks_is_not_a_rank_folder():
    assert rank_folder(str(FIXTURES / "h200" / "tb_logs" / "pytorch_fp16_bs8")) is None
    assert rank_folder(str(RANK0)) is None  # one file


def _plugin_overlap(path):
    """The plugin's Distributed view per step, as scripts/plugin_distributed.py drives it."""
    pytest.importorskip("torch_tb_profiler")
    from plugin_distributed import plugin_overlap

    return plugin_overlap(path)


@pytest.mark.parametrize(
    "path",
    [RANK0, RANK1, GLOO0, GLOO1],
    ids=["nccl-rank0", "nccl-rank1", "gloo-rank0", "gloo-rank1"],
)
def test_distributed_view_equals_the_plugins(path):
    plugin = _plugin_overlap(path)
    steps = rank_steps(load_trace(path))
    ours = {
        row.step.removeprefix("ProfilerStep#"): [
            row.computation_us,
            row.overlapping_us,
            row.communication_us,
            row.other_us,
        ]
        for row in steps.itertuples()
    }
    assert ours == plugin  # exact, µs, every step
    assert list(plugin) == (["551", "552"] if path.parent == HTA else ["1", "2"])
    assert all(
        sum(parts) == pytest.approx(row.step_us)
        for parts, row in zip(ours.values(), steps.itertuples())
    )


def _union(intervals):
    merged = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return merged


def _length(intervals, lo, hi):
    return sum(max(0, min(e, hi) - max(s, lo)) for s, e in intervals)


def _intersection(a, b):
    return [(max(s1, s2), min(e1, e2)) for s1, e1 in a for s2, e2 in b if min(e1, e2) > max(s1, s2)]


def test_tool_figures_against_plain_interval_unions():
    """Kernel, communication and exposed communication time per step of rank 0, from its
    kernels' intervals by plain Python (NCCL kernels are its communication kernels)."""
    events = _json(RANK0)["traceEvents"]
    kernels = [(e["ts"], e["ts"] + e["dur"], e["name"]) for e in events if e.get("cat") == "kernel"]
    comm = _union([(s, e) for s, e, n in kernels if n.startswith("nccl")])
    compute = _union([(s, e) for s, e, n in kernels if not n.startswith("nccl")])
    overlap = _union(_intersection(compute, comm))
    steps = rank_steps(load_trace(RANK0))
    assert len(steps) == 2
    for row in steps.itertuples():
        assert row.kernel_us == pytest.approx(_length(compute, row.start, row.end), abs=1e-6)
        assert row.comm_us == pytest.approx(_length(comm, row.start, row.end), abs=1e-6)
        exposed = _length(comm, row.start, row.end) - _length(overlap, row.start, row.end)
        assert row.exposed_comm_us == pytest.approx(exposed, abs=1e-6)
        assert row.busy_us == pytest.approx(row.step_us - exposed, abs=1e-6)
        assert row.comm_us > 100_000  # the NCCL kernels hold over 100 ms of each step


def test_straggler_and_its_cost():
    figures = RankRun(str(HTA)).figures
    s = figures.straggler
    by_rank = {r: [x for x in figures.per_step if x.rank == r] for r in (0, 1)}
    busy = {r: sum(x.busy_ms for x in by_rank[r]) / 2 for r in (0, 1)}
    assert s.rank == max(busy, key=busy.get) == 1
    costs = [a.exposed_comm_ms - b.exposed_comm_ms for a, b in zip(by_rank[0], by_rank[1])]
    assert s.cost_ms == pytest.approx(sum(costs) / 2)
    assert (s.cost_min_ms, s.cost_max_ms) == (pytest.approx(min(costs)), pytest.approx(max(costs)))
    assert s.slowest_in == sum(a.busy_ms < b.busy_ms for a, b in zip(by_rank[0], by_rank[1]))


def test_the_plugins_missed_communication_is_said():
    figures = RankRun(str(HTA)).figures
    assert any("sees less communication" in n for n in figures.notes)
    assert figures.plugin_figures == [
        "computation_ms",
        "overlapping_ms",
        "communication_ms",
        "other_ms",
    ]


def test_compare_rank_by_rank_and_whole(tmp_path):
    _write(tmp_path / "r0.json.gz", _json(RANK0))
    _write(
        tmp_path / "r1.json.gz",
        {**_json(RANK1), "distributedInfo": {"backend": "nccl", "rank": 2, "world_size": 128}},
    )
    both = RankComparison(RankRun(str(HTA)), RankRun(str(tmp_path))).figures
    assert [d.rank for d in both.ranks] == [0]
    assert (both.only_a, both.only_b) == ([1], [2])
    assert both.ranks[0].step_ms_a == both.ranks[0].step_ms_b
    assert any("only A: 1; only B: 2" in n for n in both.notes)
    assert both.job_step_ratio == pytest.approx(1.0)


# ---- the commands -----------------------------------------------------------------------------


def test_summarize_a_rank_folder(cli):
    done = cli("summarize", str(HTA))
    assert done.code == 0, done.stderr
    out = done.stdout
    assert "2 rank traces (ranks 0-1 of a world of 128, nccl)" in out
    assert (
        "computation†" in out and "the TensorBoard plugin's Distributed view gives these too" in out
    )
    assert "straggler: rank 1" in out and "ranks 2-127 missing" in out
    refused = cli("summarize", str(HTA), "--view", "kernels")
    assert refused.code != 0 and "folder of rank traces" in refused.stderr
    assert "Traceback" not in refused.stderr


def test_summarize_and_compare_json_follow_their_schemas(cli, tmp_path):
    from .test_cli_output import json_of, validate

    data = validate("summarize-ranks", json_of(cli("summarize", str(HTA), "--json")))
    assert data["ranks"] == [0, 1] and data["straggler"]["rank"] == 1
    assert [s["step"] for s in data["per_step"] if s["rank"] == 0] == [
        "ProfilerStep#551",
        "ProfilerStep#552",
    ]
    both = validate("compare-ranks", json_of(cli("compare", str(HTA), str(HTA), "--json")))
    assert both["job_step_ratio"] == 1.0 and [d["rank"] for d in both["ranks"]] == [0, 1]


def test_summarize_out_writes_summary_md(cli, tmp_path):
    done = cli("summarize", str(HTA), "--out", str(tmp_path / "out"))
    assert done.code == 0, done.stderr
    md = (tmp_path / "out" / "summary.md").read_text()
    assert md.startswith("# Rank traces:") and "straggler: rank 1" in md
    assert "| rank | step |" in md  # each rank's steps
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "ranks.csv",
        "steps.csv",
        "summary.json",
        "summary.md",
    ]


def test_compare_refuses_a_rank_folder_beside_a_run(cli):
    done = cli("compare", str(HTA), str(FIXTURES / "h200" / "runs" / "pytorch_fp16_bs8"))
    assert done.code != 0 and "not a folder of rank traces" in done.stderr


def test_report_pages_of_rank_folders(tmp_path):
    from profiler.commands.report import run

    one = run(str(HTA), None, tmp_path / "one.html")
    text = one.read_text()
    assert "Straggler" in text and "Each rank&#x27;s steps" in text and "ProfilerStep#552" in text
    two = run(str(HTA), str(HTA), tmp_path / "two.html")
    assert "Rank by rank" in two.read_text() and "The runs as a whole" in two.read_text()


def test_cpu_tool_figures_against_plain_interval_unions():
    """A gloo rank's communication on the CPU: the union of its collective operators' spans on
    the steps' thread (gloo runs all_reduce on threads of its own), by plain Python."""
    events = [e for e in _json(GLOO0)["traceEvents"] if e.get("ph") == "X"]
    main = {e["tid"] for e in events if e["name"].startswith("ProfilerStep#")}
    prefixes = ("gloo:", "nccl:", "c10d::", "_c10d_functional::")
    comm = _union(
        [
            (e["ts"], e["ts"] + e["dur"])
            for e in events
            if e["tid"] in main
            and e.get("cat") in ("cpu_op", "user_annotation")
            and (e["name"].startswith(prefixes) or e["name"] == "record_param_comms")
        ]
    )
    steps = rank_steps(load_trace(GLOO0))
    assert list(steps["step"]) == ["ProfilerStep#1", "ProfilerStep#2"]
    for row in steps.itertuples():
        assert row.kernel_us == 0
        assert row.comm_us == pytest.approx(_length(comm, row.start, row.end), abs=1e-6)
        assert row.exposed_comm_us == row.comm_us
        assert row.busy_us == pytest.approx(row.step_us - row.comm_us)
        assert 0 < row.comm_us < row.step_us


def test_a_run_of_nproc_ranks_is_a_rank_folder():
    """`run --nproc 2`'s run folder names one trace as the run's and each rank's in its ranks
    block: it reads as the two ranks, as its trace folder does, with the same figures."""
    by_run, by_folder = RankRun(str(GLOO_RUN)), RankRun(str(GLOO_TRACES))
    assert [p.name for p, _ in by_run.traces] == [GLOO0.name, GLOO1.name]
    a, b = by_run.figures, by_folder.figures
    assert (a.ranks, a.world_size, a.backend, a.missing_ranks) == ([0, 1], 2, "gloo", [])
    assert a.per_rank == [
        r.__class__(**{**{f: getattr(r, f) for f in r.__struct_fields__}, "trace": p.trace})
        for r, p in zip(b.per_rank, a.per_rank)
    ]
    assert any("traces without kernels" in n for n in a.notes)


def test_compare_two_runs_of_different_worlds(cli):
    from .test_cli_output import json_of

    both = json_of(cli("compare", str(HTA), str(GLOO_RUN), "--json"))
    assert [d["rank"] for d in both["ranks"]] == [0, 1]
    assert any("world sizes differ: A 128, B 2" in n for n in both["notes"])
    shown = cli("compare", str(HTA), str(GLOO_RUN))
    assert shown.code == 0 and "job step (the slowest rank's step, mean)" in shown.stdout


def test_distributed_view_against_plain_interval_unions():
    """The plugin's four figures of a gloo rank from its events by plain Python, as the
    plugin's definitions read (no kernel: computation is the cpu_op spans but steps and the
    nccl:/gloo: operators, communication those operators' spans; the steps are the
    ProfilerStep#N spans)."""
    from profiler.trace.breakdown import PLUGIN_COMMUNICATION_OPS

    events = [e for e in _json(GLOO1)["traceEvents"] if e.get("ph") == "X"]
    steps = [(e["ts"], e["ts"] + e["dur"]) for e in events if e["name"].startswith("ProfilerStep#")]
    comm = _union(
        [
            (e["ts"], e["ts"] + e["dur"])
            for e in events
            if e.get("cat") in ("cpu_op", "user_annotation")
            and e["name"] in PLUGIN_COMMUNICATION_OPS
        ]
    )
    comp = _union(
        [
            (e["ts"], e["ts"] + e["dur"])
            for e in events
            if e.get("cat") == "cpu_op"
            and e["name"] not in PLUGIN_COMMUNICATION_OPS
            and not e["name"].startswith("ProfilerStep#")
        ]
    )
    overlap = _union(_intersection(comp, comm))
    rows = rank_steps(load_trace(GLOO1))
    assert len(rows) == len(steps) == 2
    for (lo, hi), row in zip(steps, rows.itertuples()):
        c, m, o = _length(comp, lo, hi), _length(comm, lo, hi), _length(overlap, lo, hi)
        assert (row.start, row.end) == (lo, hi)
        assert row.computation_us == pytest.approx(c - o, abs=1e-3)
        assert row.overlapping_us == pytest.approx(o, abs=1e-3)
        assert row.communication_us == pytest.approx(m - o, abs=1e-3)
        assert row.other_us == pytest.approx((hi - lo) - (c + m - o), abs=1e-3)
        assert o > 0.2 * m  # the thread's waits under gloo's spans: the plugin's "overlapping"
