"""--workload generate on the CPU: the greedy loops, the run end to end (result.json, CSVs, a
real CPU trace with phase spans), the phase analysis of that trace and of a real H200 trace, bad
input, and the split TensorRT engines through the stand-in torch_tensorrt of
test_tensorrt_backend (which has no engines: it checks the build/cache/bucket flow, not how
TensorRT behaves)."""

import csv
import json
import sys

import pytest
import torch
from typer.testing import CliRunner

from profiler.collect import backends
from profiler.collect.backends import tensorrt as ttrt
from profiler.collect.workloads import generation_parts, loops
from profiler.errors import UserError
from profiler.runs.config import RunConfig
from profiler.runs.result import read_result, result_to_dict
from profiler.trace import phase_kernels
from profiler.trace.kernels import kernel_summary
from profiler.trace.load import load_trace
from profiler.trace.steps import step_windows
from tests import test_tensorrt_backend
from tests.conftest import FIXTURES, ROOT
from tests.test_cli_errors import assert_nothing_written, assert_one_line_error
from tests.tiny_models import tiny_gpt2, tiny_seq2seq

# the TensorRT stand-in's fixtures, shared
fake_trt, fake_engines = test_tensorrt_backend.fake_trt, test_tensorrt_backend.fake_engines
NEW_TOKENS = 3
SEQ2SEQ = [
    "--model",
    "tests.tiny_models:tiny_seq2seq",
    "--workload",
    "generate",
    "--bs",
    "2",
    "--src-len",
    "6",
    "--max-new-tokens",
    str(NEW_TOKENS),
    "--iters",
    "2",
    "--timed-warmup",
    "0",
    "--wait",
    "0",
    "--warmup",
    "1",
    "--active",
    "2",
]
# the names `run` gives: the model's, and _gen for a generation run without --name
BF16_RUN = "pytorch_bf16_bs2_tiny_seq2seq_gen"
GPT2 = [
    "--model",
    "tests.tiny_models:tiny_gpt2",
    "--workload",
    "generate",
    "--bs",
    "2",
    "--prompt-len",
    "5",
    "--max-new-tokens",
    str(NEW_TOKENS),
    "--iters",
    "2",
    "--timed-warmup",
    "0",
    "--wait",
    "0",
    "--warmup",
    "1",
    "--active",
    "2",
]


# ----- the loops ---------------------------------------------------------------------------------


def _eager_parts(model):
    return loops.Seq2SeqParts(model.encode, model.decode, model.project)


def test_recompute_loop_matches_teacher_forced_forward():
    model, (src,) = tiny_seq2seq()
    model.eval()
    generation = loops.greedy_seq2seq(_eager_parts(model), src, 5)
    assert generation.tokens.shape == (2, 5)
    target = torch.cat([torch.full((2, 1), loops.BOS), generation.tokens[:, :-1]], dim=1)
    with torch.inference_mode():
        assert torch.equal(model(src, target).argmax(-1), generation.tokens)
        assert torch.allclose(generation.encoder_output, model.encode(src))


def test_padded_buckets_do_not_change_the_tokens():
    model, (src,) = tiny_seq2seq()
    model.eval()
    assert loops.bucket_lengths(5, 48, bucket=4) == [4, 8]
    assert loops.bucket_lengths(40, 48) == [16, 32, 48]
    assert loops.bucket_lengths(1, 48) == [16]
    seen = []

    def decoder(length):
        def decode(tgt, memory):
            seen.append((length, tgt.size(1)))
            return model.decode(tgt, memory)

        return decode

    padded = loops.padded_decoder({n: decoder(n) for n in (4, 8)}, 48, bucket=4)
    out = loops.greedy_seq2seq(loops.Seq2SeqParts(model.encode, padded, model.project), src, 5)
    exact = loops.greedy_seq2seq(_eager_parts(model), src, 5)
    assert seen == [(4, 4)] * 4 + [(8, 8)]  # every call padded to its bucket
    assert torch.equal(out.tokens, exact.tokens)
    assert torch.allclose(out.first_logits, exact.first_logits, atol=1e-5)


def test_kv_cache_loops_match_a_forward_without_cache():
    model, (prompt,) = tiny_gpt2()
    model.eval()
    outputs = []
    for static in (False, True):
        parts = loops.lm_parts(model.model, 2, 5, 4, "cpu", torch.float32, static_cache=static)
        outputs.append(loops.greedy_lm(parts, prompt, 4))
    assert torch.equal(outputs[0].tokens, outputs[1].tokens)
    with torch.inference_mode():
        ids = torch.cat([prompt, outputs[0].tokens[:, :-1]], dim=1)
        assert torch.equal(model(ids)[:, 4:].argmax(-1), outputs[0].tokens)


# ----- a run end to end --------------------------------------------------------------------------


def _invoke(*args):
    from profiler.cli.app import app

    done = CliRunner().invoke(app, list(args))
    assert done.exit_code == 0, (done.stderr, done.exception)
    return done


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Two real generation runs (tiny transformer: bf16 and fp32; tiny gpt2: bf16)."""
    workdir = tmp_path_factory.mktemp("generate")
    patch = pytest.MonkeyPatch()
    patch.chdir(workdir)
    patch.syspath_prepend(str(ROOT))
    patch.delenv("COLUMNS", raising=False)  # the width a pipe gets (see conftest)
    try:
        outputs = {
            "bf16": _invoke("run", "--backend", "pytorch_bf16", *SEQ2SEQ).stdout,
            "fp32": _invoke("run", "--backend", "pytorch_fp32", *SEQ2SEQ, "--name", "ref").stdout,
            "lm": _invoke("run", "--backend", "pytorch_bf16", *GPT2, "--name", "lm").stdout,
        }
        yield workdir, outputs
    finally:
        patch.undo()


def _result(workdir, run):
    return json.loads((workdir / "runs" / run / "result.json").read_text())


def test_result_holds_per_phase_timing_and_token_agreement(runs):
    workdir, outputs = runs
    result = _result(workdir, BF16_RUN)
    generation = result["generation"]
    assert result["workload"] == "generate" and generation["kind"] == "encoder-decoder"
    assert generation["phases"] == ["encode", "decode", "project"]
    assert len(generation["step_ms_by_position"]) == NEW_TOKENS
    assert generation["per_token_ms"]["count"] == 2 * (NEW_TOKENS - 1)  # after the first token
    assert generation["ttft_ms"]["p50"] > generation["encode_ms"]["mean"] > 0
    assert generation["tokens_per_s"] == pytest.approx(
        2 * NEW_TOKENS / (generation["sequence_ms"]["mean"] / 1000)
    )
    assert result["timing"]["mean_ms"] == pytest.approx(generation["sequence_ms"]["mean"])
    numerics = result["numerics"]
    assert 0 < numerics["encoder_output"]["rel_l2_error"] < 0.1  # bf16 vs fp32
    assert numerics["rel_l2_error"] == numerics["first_step_logits"]["rel_l2_error"]
    tokens = numerics["tokens"]
    assert tokens["sequences"] == 2 and tokens["positions"] == NEW_TOKENS
    assert 0 <= tokens["sequences_identical"] <= tokens["positions_equal"] <= 1
    assert "tokens equal" in outputs["bf16"] and "TTFT p50" in outputs["bf16"]
    assert "skipped" in _result(workdir, "pytorch_fp32_bs2_ref")["numerics"]
    typed = read_result(workdir / "runs" / BF16_RUN)  # the same keys, typed
    assert typed.workload == "generate" and typed.generation.kind == "encoder-decoder"
    assert typed.generation.ttft_ms.p50 == generation["ttft_ms"]["p50"]
    assert typed.numerics.tokens.positions_equal == tokens["positions_equal"]
    assert typed.timing.unit == typed.profile.step_is == "one whole generation"
    # the forward window's plan, noise and memory, over whole generations
    assert typed.timing.iters == 2 and typed.timing.iterations_chosen_by == "--iters 2"
    assert typed.timing.noise is not None and typed.timing.noise.cv >= 0
    assert typed.memory is not None and typed.memory.scope == "n/a (CPU)"
    assert typed.profile.phase_spans == ["encode", "decode", "project"]
    assert "generation_steps.csv" in typed.backend.artifacts
    assert "recomputes" in typed.backend.extra["decode"]
    with open(workdir / "runs" / BF16_RUN / "generation_steps.csv") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 2 * NEW_TOKENS and [int(r["position"]) for r in rows[:NEW_TOKENS]] == list(
        range(NEW_TOKENS)
    )


def test_lm_result_has_prefill_and_no_encoder(runs):
    workdir, _ = runs
    result = _result(workdir, "pytorch_bf16_bs2_lm")
    assert result["generation"]["kind"] == "decoder-only"
    assert result["generation"]["encode_ms"] is None
    assert result["numerics"]["encoder_output"] is None
    assert "StaticCache" in result["backend"]["notes"]["kv_cache"]


def test_real_cpu_trace_has_one_generation_per_profiler_step(runs):
    workdir, _ = runs
    for run, counts in (
        (BF16_RUN, {"encode": 1, "decode": NEW_TOKENS, "project": NEW_TOKENS}),
        ("pytorch_bf16_bs2_lm", {"prefill": 1, "decode": NEW_TOKENS - 1}),
    ):
        trace = load_trace(_result(workdir, run)["trace"]["files"][0])
        spans = phase_kernels.phase_spans(trace)
        per_step = spans.groupby(["step", "phase"]).size()
        steps = sorted(spans["step"].unique())
        assert len(steps) == 2 and all(s.startswith("ProfilerStep#") for s in steps)
        for step in steps:
            assert per_step[step].to_dict() == counts
        summary = phase_kernels.phase_summary(trace)
        assert not summary.has_kernels  # a CPU trace: spans, no kernels
        table = summary.phases.set_index("phase")
        assert set(table.index) == set(counts)
        assert (table["launches"] == 0).all() and table["gpu_idle_us"].isna().all()
        decode = summary.positions[summary.positions["phase"] == "decode"]
        assert list(decode["position"]) == list(range(counts["decode"]))
        assert (decode["spans"] == 2).all() and (decode["mean_wall_us"] > 0).all()


def test_a_generation_run_is_named_with_gen_unless_named():
    assert (
        RunConfig(model="transformer", workload="generate").run_name
        == "pytorch_fp32_bs8_transformer_gen"
    )
    assert RunConfig(model="gpt2", workload="generate", name="lm").run_name == "pytorch_fp32_bs8_lm"
    assert RunConfig(model="transformer").run_name == "pytorch_fp32_bs8_transformer"


def test_a_forward_result_writes_no_generation_keys():
    written = result_to_dict(read_result(FIXTURES / "h200" / "runs" / "ttrt_fp16_bs8"))
    assert "workload" not in written and "generation" not in written
    assert "unit" not in written["timing"] and "step_is" not in written["profile"]
    assert "tokens" not in written["numerics"]


def test_summarize_and_compare_show_the_phases(runs):
    workdir, _ = runs
    patch = pytest.MonkeyPatch()
    patch.chdir(workdir)
    try:
        text = _invoke("summarize", BF16_RUN, "--view", "phases").stdout
        assert "Phases" in text and "decode step by position" in text and "project" in text
        data = json.loads(_invoke("summarize", BF16_RUN, "--json").stdout)
        assert [row["phase"] for row in data["phases"]["phases"]] == ["encode", "decode", "project"]
        text = _invoke("compare", "pytorch_fp32_bs2_ref", BF16_RUN, "--view", "full").stdout
        assert "Phases, A vs B" in text and "decode step by position, A vs B" in text
    finally:
        patch.undo()


def test_benchmark_row_carries_the_generation_columns(runs, tmp_path):
    from profiler.analysis.benchmark import benchmark_table
    from profiler.runs.manifest import SweepCell, SweepManifest
    from profiler.sweep import plan as sweep_module

    workdir, _ = runs
    model = "tests.tiny_models:tiny_seq2seq"
    name = sweep_module.cell_name("pytorch_bf16", 2, model, "generate")
    assert name == BF16_RUN  # a sweep cell is named as `run` names the run
    sweep = tmp_path / "sweep"
    (sweep / name).mkdir(parents=True)
    (sweep / name / "result.json").write_text(
        (workdir / "runs" / BF16_RUN / "result.json").read_text()
    )
    manifest = SweepManifest(
        options={"workload": "generate"},
        model=model,
        baseline="pytorch_bf16",
        backends=["pytorch_bf16"],
        batch_sizes=[2],
        cells={name: SweepCell(backend="pytorch_bf16", batch_size=2, status="ok")},
    )
    row = benchmark_table(sweep, manifest).iloc[0]
    result = _result(workdir, BF16_RUN)
    assert row["ttft_ms"] == pytest.approx(result["generation"]["ttft_ms"]["p50"])
    assert row["token_p99_ms"] == pytest.approx(result["generation"]["per_token_ms"]["p99"])
    assert row["tokens_per_s"] == pytest.approx(result["generation"]["tokens_per_s"])
    assert row["token_agreement"] == pytest.approx(result["numerics"]["tokens"]["positions_equal"])


def test_sweep_passes_the_generation_options_on():
    from profiler.sweep import plan as sweep

    assert {"workload", "src_len", "prompt_len", "max_new_tokens"} <= set(sweep.shared_options())
    config = sweep.cell_config(
        {"model": "transformer", "workload": "generate", "src_len": 8, "max_new_tokens": 16},
        "pytorch_fp32",
        2,
    )
    assert (config.workload, config.src_len, config.max_new_tokens) == ("generate", 8, 16)


# ----- phases on a real GPU trace ----------------------------------------------------------------


def test_phase_attribution_on_a_real_h200_trace():
    """The harness's inference_step spans as the phase: every kernel launched inside a step
    belongs to it, which step_windows counts independently."""
    trace = load_trace(next((FIXTURES / "h200" / "tb_logs" / "pytorch_fp16_bs8").glob("*.gz")))
    summary = phase_kernels.phase_summary(trace, names=("inference_step",))
    row = summary.phases.set_index("phase").loc["inference_step"]
    steps, _ = step_windows(trace)
    assert summary.has_kernels and row["spans"] == len(steps) == 3
    assert row["launches"] == steps["gpu_events"].sum() > 0
    total = kernel_summary(trace)
    assert row["kernel_us"] == pytest.approx(total.total_kernel_us)
    assert row["tensor_core_pct"] == pytest.approx(100 * total.tensor_core_share)
    assert 0 < row["gpu_idle_us"] < row["gpu_window_us"]
    assert summary.positions["spans"].tolist() == [3]


# ----- bad input ---------------------------------------------------------------------------------


def test_a_model_that_cannot_generate_is_one_line(cli):
    done = cli(
        "run",
        "--model",
        "tests.tiny_models:conv_net",
        "--workload",
        "generate",
        "--iters",
        "1",
        "--timed-warmup",
        "0",
    )
    assert_one_line_error(
        done, "--workload generate needs a model that generates", "tests.tiny_models:conv_net"
    )
    assert_nothing_written()


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["--max-new-tokens", "0"], "--max-new-tokens must be at least 1"),
        (["--src-len", "0"], "--src-len must be at least 1"),
        (["--src-len", "49"], "--src-len 49 is beyond the 48 positions"),
        (["--max-new-tokens", "60"], "--max-new-tokens 60 is beyond the 48 positions"),
        (["--workload", "chat"], "unknown --workload 'chat'"),
    ],
)
def test_bad_lengths_are_one_line(cli, args, fragment):
    done = cli("run", *SEQ2SEQ, *args)
    assert_one_line_error(done, fragment)
    assert_nothing_written()


def test_lm_prompt_plus_new_tokens_beyond_positions_is_one_line(cli):
    done = cli("run", *GPT2, "--prompt-len", "30")
    assert_one_line_error(done, "--prompt-len 30 + --max-new-tokens 3 is beyond the 32 positions")
    assert_nothing_written()


# ----- split TensorRT engines (stand-in torch_tensorrt) ------------------------------------------


def _split(tmp_path, max_new_tokens=20, **overrides):
    model, (src,) = tiny_seq2seq()
    config = RunConfig(
        backend="ttrt_fp32",
        model="tests.tiny_models:tiny_seq2seq",
        batch_size=2,
        workload="generate",
        max_new_tokens=max_new_tokens,
        cache_dir=tmp_path / "cache",
        runs_dir=tmp_path / "runs",
        **overrides,
    )
    return (
        generation_parts.seq2seq_parts(
            backends.get("ttrt_fp32"), model.eval(), src, config, torch.device("cpu")
        ),
        model,
        src,
    )


def test_split_engines_built_per_part_and_bucket_then_cached(fake_trt, tmp_path):
    calls, _ = fake_trt
    (parts, source, notes), model, src = _split(tmp_path)
    assert list(notes["split_engines"]) == [
        "encoder",
        "decoder_len16",
        "decoder_len32",
        "projection",
    ]
    assert len(calls) == 4 and "[16, 32]" in notes["decode"]
    for part in notes["split_engines"].values():
        assert part["cache"]["stored"] is True and part["compile_s"] > 0
    assert "decoder_len16_tensorrt_build.log" in notes["artifacts"]
    tokens = loops.greedy_seq2seq(parts, source, 20).tokens
    assert torch.equal(tokens, loops.greedy_seq2seq(_eager_parts(model), src, 20).tokens)

    (_, _, again), _, _ = _split(tmp_path)
    assert len(calls) == 4  # every part loaded from the cache
    assert all(p["cache"]["hit"] for p in again["split_engines"].values())


def test_split_engines_on_a_hit_reuse_their_descriptions(
    fake_trt, fake_engines, tmp_path, monkeypatch
):
    (_, _, built), _, _ = _split(tmp_path)

    def refuse(*args, **kwargs):
        raise AssertionError("a cached engine was described again")

    monkeypatch.setattr(ttrt, "layer_info", refuse)
    monkeypatch.setattr(ttrt, "engine_device_memory", refuse)
    (_, _, again), _, _ = _split(tmp_path)
    assert all(p["cache"]["hit"] for p in again["split_engines"].values())
    for part, notes in again["split_engines"].items():
        assert notes["layer_files"] == [
            f"{part}_engine_layers_0.json",
            f"{part}_engine_layers_1.json",
        ]
        for key in ("engine_count", "layer_files", "engine_memory"):
            assert notes[key] == built["split_engines"][part][key]
    layers = {n: t for n, t in built["artifacts"].items() if "_engine_layers_" in n}
    assert len(layers) == 8 and layers == {
        n: t for n, t in again["artifacts"].items() if "_engine_layers_" in n
    }
    assert again["warnings"] == built["warnings"]


def test_the_stand_in_refuses_a_varargs_forward_as_torch_export_does(fake_trt):
    class VarArgs(torch.nn.Module):  # what the split engines once compiled: forward(*args)
        def forward(self, *args):
            return args[0] * 2

    with pytest.raises(
        Exception, match="mismatch between the structure of `inputs` and `dynamic_shapes`"
    ):
        sys.modules["torch_tensorrt"].compile(VarArgs(), ir="dynamo", inputs=[torch.ones(2, 3)])


def test_one_failed_split_engine_is_one_line_and_keeps_its_log(fake_trt, tmp_path, monkeypatch):
    module = sys.modules["torch_tensorrt"]
    build = module.compile

    def fail_the_decoder(model, ir, inputs, **options):
        if getattr(model, "method", None) == "decode":
            raise RuntimeError("Myelin: shape input value out of bounds (fake)")
        return build(model, ir, inputs, **options)

    monkeypatch.setattr(module, "compile", fail_the_decoder)
    with pytest.raises(UserError) as error:
        _split(tmp_path)
    message = str(error.value)
    log = tmp_path / "runs" / "ttrt_fp32_bs2_tiny_seq2seq_gen.failed" / "tensorrt_build.log"
    assert "\n" not in message and "decoder_len16 engine" in message and str(log) in message
    assert "out of bounds (fake)" in log.read_text()


def test_ttrt_on_the_lm_says_why_in_one_line(tmp_path):
    model, (prompt,) = tiny_gpt2()
    config = RunConfig(
        backend="ttrt_fp16",
        model="tests.tiny_models:tiny_gpt2",
        batch_size=2,
        workload="generate",
        max_new_tokens=3,
    )
    with pytest.raises(UserError, match="does not convert .* with a KV cache"):
        generation_parts.lm_parts(
            backends.get("ttrt_fp16"), model, prompt, config, torch.device("cpu")
        )


def test_a_family_that_does_not_run_a_loop_is_refused_in_one_line():
    """The backend's family builds a loop's parts or refuses it: in its own words (TensorRT and
    the LM's KV cache), else naming the families that run that loop."""
    model, (src,) = tiny_seq2seq()
    config = RunConfig(
        backend="torchscript_fp32",
        model="tests.tiny_models:tiny_seq2seq",
        batch_size=2,
        workload="generate",
        max_new_tokens=3,
    )
    refused = {}
    for name in ("torchscript_fp32", "ort_fp32", "ttrt_fp16"):
        for kind, build in (
            ("seq2seq", generation_parts.seq2seq_parts),
            ("lm", generation_parts.lm_parts),
        ):
            if (name, kind) == ("ttrt_fp16", "seq2seq"):
                continue  # it builds split engines (the tests above)
            with pytest.raises(UserError) as error:
                build(backends.get(name), model, src, config, torch.device("cpu"))
            refused[name, kind] = str(error.value)
    assert refused == {
        ("torchscript_fp32", "seq2seq"): "backend torchscript_fp32 cannot run --workload "
        "generate; use a pytorch_*, inductor_* or ttrt_* backend",
        ("torchscript_fp32", "lm"): "backend torchscript_fp32 cannot run --workload generate; "
        "use a pytorch_* or inductor_* backend",
        ("ort_fp32", "seq2seq"): "backend ort_fp32 cannot run --workload generate; use a "
        "pytorch_*, inductor_* or ttrt_* backend",
        ("ort_fp32", "lm"): "backend ort_fp32 cannot run --workload generate; use a pytorch_* "
        "or inductor_* backend",
        ("ttrt_fp16", "lm"): "ttrt_fp16 does not convert tests.tiny_models:tiny_seq2seq with a "
        "KV cache for --workload generate: the cache is a Python object that the split-engine "
        "path does not export; use pytorch_* or inductor_*",
    }


# ----- a real H100 generation trace (tests/fixtures/h100_generate) -------------------------------

H100_GPT2 = FIXTURES / "h100_generate" / "runs" / "inductor_fp16_bs1_fixture"


def test_prefill_and_decode_split_on_a_real_h100_generation():
    from profiler.runs.command_targets import resolve_target

    target = resolve_target(str(H100_GPT2))
    result = target.result
    assert (result.generation.kind, result.generation.max_new_tokens) == ("decoder-only", 16)
    trace = load_trace(target.path)
    summary = phase_kernels.phase_summary(trace, names=tuple(result.generation.phases))
    rows = summary.phases.set_index("phase")
    # one prefill, then a decode step per token after the first
    assert rows.loc["prefill", "spans"] == 1 and rows.loc["decode", "spans"] == 15
    assert rows.loc["decode", "kernel_us"] > 10 * rows.loc["prefill", "kernel_us"] > 0
    total = kernel_summary(trace).total_kernel_us
    attributed = rows.loc[["prefill", "decode"], "kernel_us"].sum()
    assert attributed / total > 0.99  # nearly every kernel launched inside a phase span
    # a static KV cache: every decode step launches the same kernels
    decode = summary.positions[summary.positions["phase"] == "decode"]
    assert list(decode["position"]) == list(range(15))
    assert decode["mean_launches"].nunique() == 1
    assert 0 < rows.loc["decode", "tensor_core_pct"] < 100


def test_encode_decode_project_split_on_real_h100_split_engines():
    from profiler.runs.command_targets import resolve_target

    target = resolve_target(str(FIXTURES / "h100_generate" / "runs" / "ttrt_fp16_bs1_fixture"))
    generation = target.result.generation
    assert (generation.kind, generation.max_new_tokens) == ("encoder-decoder", 16)
    trace = load_trace(target.path)
    rows = phase_kernels.phase_summary(trace, names=tuple(generation.phases)).phases.set_index(
        "phase"
    )
    assert rows.loc["encode", "spans"] == 1
    assert rows.loc["decode", "spans"] == rows.loc["project", "spans"] == 16
    # the decoder engine, run once per token, is where the kernel time goes
    assert rows.loc["decode", "kernel_us"] > 10 * rows.loc["encode", "kernel_us"] > 0
    assert rows.loc["decode", "kernel_us"] > 10 * rows.loc["project", "kernel_us"] > 0
    assert rows.loc["project", "tensor_core_pct"] == pytest.approx(100.0)
