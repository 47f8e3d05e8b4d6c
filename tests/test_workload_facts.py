"""A workload's facts (profiler.runs.workloads) drive what the code that knows only its name
decides: the run's folder name, the built-in models' inputs, --cuda-graphs (and advise's
experiment of it), the GPU-time window and sampling in fresh processes. A stand-in workload,
registered for one test, gets each decision from its row alone."""

import pytest

from profiler.analysis.advice import Advice
from profiler.analysis.experiments import plan
from profiler.collect import cuda_graphs, gpu_time, models
from profiler.errors import UserError
from profiler.runs import workloads
from profiler.runs.config import RunConfig, run_name
from profiler.sweep.plan import DEFAULT_PROCESSES_GPU, check_sampling


@pytest.fixture
def stand_in(monkeypatch):
    """Two stand-in workloads: one that claims what forward does, one that claims what
    generate does; neither is called forward or generate."""
    like_forward = workloads.WorkloadFacts(
        "steady", run_suffix="_steady", not_captured=None, gpu_time=True, sampled=True
    )
    like_generate = workloads.WorkloadFacts("chatty", prompts=True, not_captured="it chats")
    for facts in (like_forward, like_generate):
        monkeypatch.setitem(workloads.WORKLOADS, facts.name, facts)
    return like_forward, like_generate


def test_the_run_name_takes_the_workloads_suffix(stand_in):
    assert run_name("pytorch_fp32", 8, workload="steady") == "pytorch_fp32_bs8_steady"
    assert run_name("pytorch_fp32", 8, workload="chatty") == "pytorch_fp32_bs8"
    assert RunConfig(workload="steady").run_name == "pytorch_fp32_bs8_steady"
    assert run_name("pytorch_fp32", 8, workload="generate") == "pytorch_fp32_bs8_gen"


def test_cuda_graphs_and_the_gpu_time_window_follow_the_facts(stand_in):
    assert cuda_graphs.refusal(RunConfig(workload="steady"), "pytorch", True) is None
    why = cuda_graphs.refusal(RunConfig(workload="chatty"), "pytorch", True)
    assert why == "--workload chatty is not captured (it chats)"
    assert gpu_time.why_not(True, "steady") is None
    assert gpu_time.why_not(True, "chatty") == gpu_time.FORWARD_ONLY
    # a name with no row (a result written by another version) claims nothing
    assert gpu_time.why_not(True, "unknown") == gpu_time.FORWARD_ONLY


def test_sampling_follows_the_facts(stand_in):
    assert check_sampling(3, None, None, "local", None, "steady") == 3
    assert check_sampling(None, None, None, "local", ["0"], "steady") == DEFAULT_PROCESSES_GPU
    assert check_sampling(None, None, None, "local", ["0"], "chatty") == 1
    with pytest.raises(UserError, match="do not apply to --workload chatty yet"):
        check_sampling(3, None, None, "local", None, "chatty")


def test_advise_tries_cuda_graphs_only_where_the_workload_is_captured(stand_in):
    launch = [
        Advice(
            rule="launch-bound",
            title="",
            action="",
            source="",
            projection="estimate",
            figures={"idle_share": 0.5, "projected_speedup": 2.0},
        )
    ]
    config = {"backend": "pytorch_fp32", "batch_size": 8, "cuda_graphs": False}
    steady = [e.changes for e in plan(launch, {**config, "workload": "steady"}).experiments]
    chatty = [e.changes for e in plan(launch, {**config, "workload": "chatty"}).experiments]
    assert {"cuda_graphs": True} in steady and {"cuda_graphs": True} not in chatty


def test_a_workload_of_prompts_gets_the_models_prompt_inputs(stand_in):
    config = RunConfig(model="transformer", workload="chatty", batch_size=2, src_len=5, seq_len=7)
    _, inputs = models.MODELS["transformer"](config)
    assert [tuple(t.shape) for t in inputs] == [(2, 5)]  # the source tokens alone
    _, inputs = models.MODELS["transformer"](
        RunConfig(model="transformer", workload="steady", batch_size=2, src_len=5, seq_len=7)
    )
    assert [tuple(t.shape) for t in inputs] == [(2, 7), (2, 7)]  # a forward pass's batch
