"""run --nproc N: tensor-parallel llama-tiny decode over ranks started by torch.distributed's
elastic launcher (profiler/collect/ranks.py, profiler/collect/tensor_parallel.py).
One 2-rank gloo run on the CPU end to end, forked from a process that ran OpenMP threads (the
ranks' traces in one folder, each with its rank, their all-reduces), a run whose ranks fail
(one line, nothing written), and the refusals."""

from __future__ import annotations

import gzip
import json
import re
import signal
from pathlib import Path

import pytest
import torch

from profiler.collect import ranks, tensor_parallel
from profiler.errors import UserError
from profiler.runs.config import RunConfig
from profiler.runs.result import read_result
from tests.conftest import FIXTURES, invoke_in

TINY_TP = [
    "--model",
    "llama-tiny",
    "--workload",
    "generate",
    "--bs",
    "1",
    "--prompt-len",
    "4",
    "--max-new-tokens",
    "2",
    "--iters",
    "1",
    "--timed-warmup",
    "0",
    "--wait",
    "0",
    "--warmup",
    "0",
    "--active",
    "1",
    "--nproc",
    "2",
]
#: BF16, so that the numeric check runs: the shards' generation against a whole FP32 model's
RUN = "pytorch_bf16_bs1_llama-tiny_gen_tp2"
FIXTURE = FIXTURES / "ranks_gloo_cpu"
FIXTURE_RUN = "pytorch_fp32_bs1_llama-tiny_gen_tp2"


def _hung(signum: int, frame: object) -> None:
    raise TimeoutError("the ranks did not finish in 300 s: hung")


@pytest.fixture(scope="module")
def tp_run(tmp_path_factory):
    """The 2-rank run, started from a process that has run OpenMP threads (as a worker of the
    suite has: a forked rank that started a team of its own would hang), under a watchdog."""
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    square = torch.rand(512, 512, dtype=torch.bfloat16)
    (square @ square).sum()
    torch.set_num_threads(threads)
    folder = tmp_path_factory.mktemp("tp")
    before = signal.signal(signal.SIGALRM, _hung)
    signal.alarm(300)
    try:
        done = invoke_in(folder, "run", *TINY_TP, "--backend", "pytorch_bf16")
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, before)
    assert done.code == 0, done.stderr
    for rank in (0, 1):  # a line a rank: its figures and its trace
        assert f"rank {rank} (cpu): TTFT p50 " in done.stderr
        assert f"; trace llama-tiny.rank{rank}." in done.stderr
    return folder


def _trace(path: Path) -> dict:
    with gzip.open(path) as stream:
        return json.load(stream)


def test_each_rank_writes_its_trace_into_the_one_folder(tp_run):
    traces = sorted((tp_run / "tb_logs" / RUN).glob("*.pt.trace.json.gz"))
    assert [p.name.split(".")[:2] for p in traces] == [
        ["llama-tiny", "rank0"],
        ["llama-tiny", "rank1"],
    ]
    for rank, path in enumerate(traces):
        info = _trace(path)["distributedInfo"]  # torch.profiler's, from the process group
        assert (info["rank"], info["world_size"], info["backend"]) == (rank, 2, "gloo")
    assert not [p for p in (tp_run / "tb_logs" / RUN).iterdir() if p.name.startswith(".rank")]


def test_the_ranks_traces_carry_their_all_reduces(tp_run):
    for path in (tp_run / "tb_logs" / RUN).glob("*.pt.trace.json.gz"):
        names = {e.get("name") for e in _trace(path)["traceEvents"]}
        # two RowwiseParallel projections per layer: their partial sums all-reduced by gloo
        assert "gloo:all_reduce" in names, path.name


def test_rank_0_records_every_rank(tp_run):
    result = read_result(tp_run / "runs" / RUN / "result.json")
    block = result.ranks
    assert (block.world_size, block.backend) == (2, "gloo")
    assert [r.rank for r in block.ranks] == [0, 1]
    assert result.config.nproc == 2 and result.config.iters == 1
    for figures in block.ranks:
        (trace,) = figures.trace_files
        assert f".rank{figures.rank}." in trace and (tp_run / trace).is_file()
        assert figures.iterations == 1 and figures.p50_ms > 0 and figures.ttft_p50_ms > 0
    assert result.trace.files == block.ranks[0].trace_files  # summarize reads rank 0's
    assert (tp_run / "runs" / RUN / "ranks" / "rank1" / "latency.csv").is_file()


def test_the_shards_generate_what_the_whole_model_does(tp_run):
    """Rank 0's first-step logits (each layer split over two ranks, BF16) against a fresh FP32
    build of the whole model with the same seed: a wrong split would be far off."""
    numerics = read_result(tp_run / "runs" / RUN / "result.json").numerics
    assert numerics.skipped is None and numerics.rel_l2_error < 0.05


def test_a_failing_rank_fails_the_run_in_one_line(tmp_path):
    bad = tmp_path / "bad.pt"
    bad.write_text("not a state dict")
    done = invoke_in(tmp_path, "run", *TINY_TP, "--weights", str(bad))
    assert done.code == 2
    (line,) = [line for line in done.stderr.splitlines() if "rank" in line and "fail" in line]
    assert line.startswith("error: rank ") and " failed: --weights " in line, done.stderr
    assert "Terminating process" not in done.stderr  # the launcher's own lines held back
    assert "nothing was written" in line
    for root in ("runs", "tb_logs"):  # no folder, no staging folder left
        assert not [p for p in (tmp_path / root).glob("*") if p.name != ".infer-profiler"]


def test_failure_line_names_the_first_rank_to_fail(tmp_path):
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError, ProcessFailure

    failures = {}
    for rank, (stamp, message) in enumerate(
        [(20, "Terminated: SIGTERM"), (10, "UserError: --prompt-len 9 is too long")]
    ):
        error_file = tmp_path / f"error{rank}.json"
        data = {"message": {"message": message, "extraInfo": {"timestamp": str(stamp)}}}
        error_file.write_text(json.dumps(data))
        failures[rank] = ProcessFailure(rank, 100 + rank, 1, str(error_file))
    line = ranks.failure_line(ChildFailedError("rank_main", failures))
    assert line == "rank 1 failed: --prompt-len 9 is too long; nothing was written"


@pytest.mark.parametrize(
    ("options", "gpus", "words"),
    [
        ({"nproc": 2}, 1, "more than the 1 GPU(s) here"),
        ({"nproc": 3}, 8, "does not split llama-tiny's attention evenly"),
        ({"nproc": 2, "model": "resnet18", "workload": "forward"}, 0, "use --model llama"),
        ({"nproc": 2, "workload": "forward"}, 0, "pass --workload generate"),
        ({"nproc": 2, "backend": "inductor_fp32"}, 0, "eager pytorch_* backends"),
        ({"nproc": 2, "min_time": 1.0}, 0, "--min-time"),
        ({"nproc": 2, "repeat_runs": 2}, 0, "--repeat-runs"),
    ],
)
def test_nproc_is_refused_where_the_ranks_cannot_run(options, gpus, words):
    config = RunConfig(**{"model": "llama-tiny", "workload": "generate", **options})
    with pytest.raises(UserError, match=re.escape(words)):
        ranks.check(config, use_cuda=gpus > 0, gpus=gpus)


def test_nproc_counts_are_checked_and_named():
    for bad, words in ((0, "at least 1"), (-2, "at least 1"), (5000, "too large")):
        with pytest.raises(UserError, match=f"--nproc.*{words}"):
            RunConfig(nproc=bad)
    config = RunConfig(model="llama-tiny", workload="generate", nproc=2)
    assert config.run_name.endswith("_gen_tp2")
    assert RunConfig(model="llama-tiny", workload="generate", nproc=2, name="x").run_name == (
        "pytorch_fp32_bs8_x"
    )
    ranks.check(config, use_cuda=True, gpus=2)  # one rank per GPU: fits
    assert ranks.ranks_config(config, use_cuda=False).iters == ranks.CPU_ITERS


def test_the_plan_shards_every_layer_over_the_mesh():
    """Colwise q/k/v, gate, up; rowwise o, down: the Megatron split of a Llama block."""
    cols = {k for k, v in tensor_parallel.PLAN.items() if v == "colwise"}
    assert cols == {
        "self_attn.q_proj",
        "self_attn.k_proj",
        "self_attn.v_proj",
        "mlp.gate_proj",
        "mlp.up_proj",
    }
    assert {k for k, v in tensor_parallel.PLAN.items() if v == "rowwise"} == {
        "self_attn.o_proj",
        "mlp.down_proj",
    }


def test_the_committed_rank_folder_is_what_the_tool_writes():
    """tests/fixtures/ranks_gloo_cpu: a real `run --nproc 2` (gloo, CPU), for the rank-folder
    analysis: each rank's trace named and marked with its rank, and rank 0's result naming
    them."""
    folder = FIXTURE / "runs" / FIXTURE_RUN
    result = read_result(folder / "result.json")
    assert (result.ranks.world_size, result.ranks.backend) == (2, "gloo")
    for figures in result.ranks.ranks:
        (trace,) = figures.trace_files
        assert f"llama-tiny.rank{figures.rank}." in trace
        assert _trace(FIXTURE / trace)["distributedInfo"]["rank"] == figures.rank
