"""LLM decode: the llama models, a generation's prefill and decode apart (the run's phase
windows, processes.csv's phase rows, the per-phase tables, rooflines and verdicts), on the CPU
with llama-tiny end to end and on the committed H200 runs of the 1 B llama
(tests/fixtures/llm_h200/README.md)."""

import json
import math

import msgspec
import numpy as np
import pytest

from profiler.analysis.generation import generation_figures, interval
from profiler.analysis.headline import compare_timed, phase_comparisons
from profiler.analysis.run_analysis import RunAnalysis
from profiler.collect import models
from profiler.runs.config import RunConfig
from profiler.runs.result import read_result
from profiler.runs.samples import (
    ITL,
    TPOT,
    TTFT,
    ConfigSamples,
    ProcessWindow,
    processes_text,
    read_samples,
)
from tests.conftest import FIXTURES, invoke_in

LLM = FIXTURES / "llm_h200" / "runs"
NEW = 4
TINY = [
    "--model",
    "llama-tiny",
    "--workload",
    "generate",
    "--bs",
    "2",
    "--prompt-len",
    "6",
    "--max-new-tokens",
    str(NEW),
    "--iters",
    "3",
    "--timed-warmup",
    "1",
    "--wait",
    "0",
    "--warmup",
    "1",
    "--active",
    "1",
]


# ---- the model ----------------------------------------------------------------------------------


def test_the_llama_models_are_llama_decoders_of_their_size():
    config = RunConfig(model="llama", workload="generate", batch_size=1)
    model, (prompt,) = models.build(config, "meta")  # no memory: shapes only
    hf = model.model
    assert type(hf).__name__ == "LlamaForCausalLM" and prompt.shape == (1, 128)
    assert 1.2e9 < sum(p.numel() for p in hf.parameters()) < 1.3e9  # tied embedding counted once
    c = hf.config
    assert (c.num_hidden_layers, c.num_attention_heads, c.num_key_value_heads) == (16, 32, 8)
    assert c.hidden_act == "silu" and model.max_len == 4096  # SwiGLU, rotary positions
    tiny, _ = models.build(RunConfig(model="llama-tiny", workload="generate"), "meta")
    assert sum(p.numel() for p in tiny.parameters()) < 200_000
    assert tiny.model.config.num_key_value_heads < tiny.model.config.num_attention_heads


# ---- one llama-tiny generation run on the CPU ---------------------------------------------


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("llm")
    done = invoke_in(folder, "run", "--backend", "pytorch_fp32", *TINY, "--repeat-runs", "2")
    assert done.code == 0, done.stderr
    return folder, folder / "runs" / "pytorch_fp32_bs2_llama-tiny_gen", done.stdout


def test_a_generation_keeps_its_phases_apart(tiny_run):
    folder, run, out = tiny_run
    result = read_result(run / "result.json")
    generation = result.generation
    assert generation.kind == "decoder-only" and generation.phases == ["prefill", "decode"]
    assert generation.tpot_ms.count == 3 and generation.tpot_ms.p50 > 0
    assert generation.per_token_ms.count == 3 * (NEW - 1)
    assert "StaticCache" in result.backend.extra["kv_cache"]
    # the prefill's and one decode step's FLOPs and bytes, counted for the roofline
    prefill, decode = (generation.phase_roofline_inputs[p] for p in ("prefill", "decode"))
    assert prefill.flops_per_batch > 4 * decode.flops_per_batch > 0
    assert prefill.weight_bytes == decode.weight_bytes > 0
    assert "TPOT" in out and "ITL" in out  # the run's generation table
    # processes.csv: the run's process and a fresh one (--repeat-runs 2), each with its TTFT,
    # TPOT and inter-token windows
    process, fresh = read_samples(run / "processes.csv").windows
    for window in (process, fresh):
        assert set(window.phases) == {TTFT, TPOT, ITL}
        assert len(window.phases[TTFT].latency_ms) == 3 == len(window.phases[TPOT].latency_ms)
        assert len(window.phases[ITL].latency_ms) == 3 * (NEW - 1)
        assert not window.phases[TTFT].gpu_ms  # no GPU time on a CPU
    assert process.median() == pytest.approx(result.timing.p50_ms)


def test_summarize_gives_each_phase_its_tables(tiny_run):
    folder, run, _ = tiny_run
    done = invoke_in(folder, "summarize", str(run), "--view", "phases")
    assert done.code == 0, done.stderr
    for line in ("Phases", "decode step by position", "TTFT", "TPOT", "tokens/s"):
        assert line in done.stdout
    data = json.loads(invoke_in(folder, "summarize", str(run), "--json").stdout)
    assert {"phases", "positions"} <= set(data["phases"])
    assert [r["phase"] for r in data["phases"]["rooflines"]] == ["prefill", "decode"]
    figures = {f["figure"]: f for f in data["headline"]["generation"]["figures"]}
    assert set(figures) == {"TTFT", "TPOT", "ITL p50", "ITL p99", "tokens/s"}
    ttft = figures["TTFT"]  # over the two processes: an interval around their geometric mean
    assert ttft["processes"] == 2 and ttft["low"] < ttft["value"] < ttft["high"]


# ---- the committed H200 runs of the 1 B llama -------------------------------------------------


@pytest.fixture(scope="module")
def graph_run():
    return RunAnalysis(LLM / "pytorch_fp16_bs1_cg_bs1")


def test_the_decode_graphs_kernels_carry_their_operators(graph_run):
    summary = graph_run.summary
    graphs = summary.graphs
    assert graphs.replays == 64 and graphs.attributed_replays == 64  # one a decode step
    assert graphs.attributed_pct == pytest.approx(100.0) and graphs.replayed_pct > 95
    decode = summary.phases.kernels["decode"]
    gemms = decode.table[decode.table["category"] == "GEMM"]
    assert set(gemms["top_operator"]) <= {"aten::mm", "aten::bmm"}
    assert not set(decode.table["top_operator"]) & {"decode", "(no operator)"}
    # the prefill runs eagerly: its kernels carry their operators without any capture
    assert "aten::mm" in set(summary.phases.kernels["prefill"].table["top_operator"])
    ops = summary.overview.operators.set_index("operator")
    assert ops.loc["aten::mm", "kernels"] > 64 * 100


def test_reduce_overhead_graphs_are_attributed_too():
    run = RunAnalysis(LLM / "inductor_fp16_bs8_ro_bs8")
    assert len(run.graph_captures.captures) == 2  # the decode step's graph, the prefill's
    graphs = run.summary.graphs
    assert graphs.replays == 65 and graphs.attributed_pct == pytest.approx(100.0)
    triton = run.kernels[run.kernels["name"].str.startswith("triton_")]
    # an Inductor kernel runs inside a range named after it: its operator is its own name
    assert (triton["name"] == triton["top_operator"]).mean() > 0.9


def test_each_phase_has_its_roofline(graph_run):
    rooflines = {phase: r for phase, _, r in graph_run.phase_rooflines}
    decode, prefill = rooflines["decode"], rooflines["prefill"]
    assert decode.bound == "memory" and decode.intensity < 2  # one token: weights read once
    assert prefill.intensity > 50 * decode.intensity
    result = graph_run.result
    assert decode.seconds == pytest.approx(result.generation.tpot_ms.p50 / 1e3)
    fast = dict((p, r) for p, _, r in RunAnalysis(LLM / "inductor_fp16_bs8_ro_bs8").phase_rooflines)
    assert fast["prefill"].bound == "compute"


def test_phase_verdicts_take_the_phase_windows():
    eager, ro = (
        read_result(LLM / f"{r}/result.json")
        for r in ("pytorch_fp16_bs1_eager_bs1", "inductor_fp16_bs1_ro_bs1")
    )
    t = compare_timed(
        eager,
        ro,
        LLM / "pytorch_fp16_bs1_eager_bs1/result.json",
        LLM / "inductor_fp16_bs1_ro_bs1/result.json",
    )
    phases = {p.phase: p for p in t.phases}
    assert set(phases) == {"ttft", "tpot"}
    tpot = phases["tpot"]
    # one recorded process a side: the floor design, and TPOT faster by the recorded medians
    assert tpot.verdicts.latency.design == "floor"
    assert tpot.speedup_x == pytest.approx(
        eager.generation.tpot_ms.p50 / ro.generation.tpot_ms.p50, rel=1e-6
    )
    # eager's decode step waits on its launches: launch-bound; the graph's is GPU-bound
    assert tpot.verdicts.bound_a.word == "launch-bound"
    assert tpot.verdicts.bound_b.word == "GPU-bound"
    assert tpot.verdicts.gpu_time is not None  # both measured one decode step's GPU time
    # eager's prefill synchronizes inside (the mask): no TTFT GPU time, said so
    assert eager.generation.phase_gpu["ttft"].not_measured.startswith("the call waits")
    assert phases["ttft"].verdicts.gpu_time is None
    assert t.generation_a is not None and t.generation_b is not None


def _window(ttft, tpot, itl, gpu=()):
    return ProcessWindow(
        (sum(itl) + ttft,),
        phases={
            TTFT: ProcessWindow((ttft,)),
            TPOT: ProcessWindow((tpot,), gpu),
            ITL: ProcessWindow(tuple(itl)),
        },
    )


def test_generation_figures_carry_an_interval_over_processes():
    samples = ConfigSamples(
        tuple(_window(10.0 * k, 2.0 * k, [2.0 * k, 2.0 * k, 4.0 * k]) for k in (1.0, 1.1, 0.9))
    )
    found = {f.figure: f for f in generation_figures(samples, batch_size=4, new_tokens=4).figures}
    geo = math.exp(np.mean(np.log([1.0, 1.1, 0.9])))
    assert found["TTFT"].value == pytest.approx(10.0 * geo)
    assert found["TTFT"].low < found["TTFT"].value < found["TTFT"].high
    assert found["ITL p99"].value == pytest.approx(np.percentile([2, 2, 4], 99) * geo)
    assert found["tokens/s"].value == pytest.approx(1000 * 16 / (18.0 * geo))
    centre, low, high = interval([5.0])
    assert centre == pytest.approx(5.0) and low is high is None  # one process: no interval


def test_phase_windows_round_trip_processes_csv(tmp_path):
    windows = ConfigSamples(
        (_window(10.0, 2.0, [2.0, 2.5], gpu=(1.5,)), _window(11.0, 2.1, [2.1, 2.2]))
    )
    path = tmp_path / "processes.csv"
    path.write_text(processes_text(windows))
    back = read_samples(path)
    assert back.phase_names == (TTFT, TPOT)
    assert back.phase(TPOT).medians("gpu_time") == [1.5]
    assert msgspec.structs.asdict(back.windows[0].phases[ITL])["latency_ms"] == (2.0, 2.5)
    # a file without the phase column (every run before phases) reads as before
    old = "process,iteration,latency_ms\n0,0,5.0\n0,1,6.0\n"
    path.write_text(old)
    assert read_samples(path).windows[0].phases == {}
    path.write_text(processes_text(windows).replace(",tpot", ",bogus"))
    with pytest.raises(Exception, match="unknown phase"):
        read_samples(path)


def test_phases_are_judged_apart():
    fast = ConfigSamples(tuple(_window(10 + k / 1e3, 1 + k / 100, [1.0]) for k in range(4)))
    slow = ConfigSamples(tuple(_window(10 + k / 1e3, 3 + k / 100, [3.0]) for k in range(4)))
    found = {p.phase: p for p in phase_comparisons(slow, fast)}
    assert found["tpot"].verdicts.latency.verdict == "faster"
    assert found["ttft"].verdicts.latency.verdict == "same"


def test_backends_say_which_loops_each_family_generates(cli):
    done = cli("backends", "--json")
    rows = {r["name"]: r for r in json.loads(done.stdout)["backends"]}
    assert "decoder-only" in rows["pytorch_fp16"]["generation"]
    assert "decoder-only" in rows["inductor_fp16"]["generation"]
    assert "not a decoder-only LM" in rows["ttrt_fp16"]["generation"]
    assert rows["ort_fp32"]["generation"] == "--workload forward only"
    table = cli("backends").stdout
    assert "its KV cache is not converted" in table


def test_the_decode_window_feeds_a_token_as_a_generation_does():
    """The GPU-time window's decode step is given a token of the kind a generation feeds back
    (an inference tensor, [batch, 1] int64, an argmax's strides): another kind fails a compiled
    step's guards and compiles it again (seen on the H200: 33-38 s of a reduce-overhead run; the
    guards named the dispatch keys, then the strides: (128, 1), a prompt's column, against an
    argmax's (1, 1))."""
    import torch

    from profiler.collect import backends
    from profiler.collect.workloads.generate import Generate
    from profiler.collect.workloads.protocol import RunContext

    config = RunConfig(model="llama-tiny", workload="generate", batch_size=1, prompt_len=5)
    model, inputs = models.build(config, "cpu")
    context = RunContext(
        config,
        backends.get("pytorch_fp32"),
        model,
        inputs,
        torch.device("cpu"),
        False,
        print,
        print,
    )
    workload = Generate(context)
    workload.prepare()
    token = workload.loop.token
    # greedy_lm feeds back each step's argmax, made in inference mode: [batch, 1] int64
    fed = workload.loop.decode()  # the first decode step after a prefill: its argmax
    assert token.is_inference() and fed.is_inference()
    assert token.shape == fed.shape == (1, 1) and token.dtype == fed.dtype == torch.long
    assert token.stride() == fed.stride()  # (a prompt's column has the prompt's row stride)
