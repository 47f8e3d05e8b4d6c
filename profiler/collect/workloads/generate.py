"""--workload generate: greedy generation timed per phase and per token, profiled one generation
per profiler step, checked against FP32 eager generation.

Timing: the forward workload's window plan (profiler.collect.timing.plan_window: ``--timed-warmup``
untimed generations, then ``--iters`` timed ones or as many as ``--min-time`` allows; the
noise of the whole-generation latencies and the window's peak memory as a forward run's;
``--repeat-runs`` times more windows in fresh processes, each with its phases). Each generation
is marked on the device timeline (CUDA events; perf_counter on the CPU) at its start, after the
encoder (encoder-decoder only) and after each token, with one synchronize at its end. From those:

- time to first token (TTFT): start to the first token (encode + first decode step + projection,
  or the prefill);
- decode per-token latency: each later token's step (the first token is in TTFT), pooled over
  the timed generations: mean, p50, p90, p99;
- sequence latency: start to the last token, per generation (the ``timing`` block's mean/p50/...
  are these, so every view that reads a run reads whole generations);
- tokens/s: batch size x new tokens / mean sequence latency;
- per position: the mean step time of each token position (grows with position when the decoder
  recomputes the whole target).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import torch

from profiler import units
from profiler.analysis.timed_window import TimedWindow, percentile
from profiler.collect import flops, gpu_time, models, numerics, timing
from profiler.collect.backends.base import Prepared
from profiler.collect.device import sync
from profiler.collect.workloads import generation_parts, loops
from profiler.collect.workloads.protocol import RunContext
from profiler.errors import UserError
from profiler.fsutil import write_text_atomic
from profiler.runs import backends as facts
from profiler.runs.backends import REFERENCE_BACKEND
from profiler.runs.config import RunConfig
from profiler.runs.result import GpuCompute
from profiler.runs.samples import ITL, TPOT, TTFT, ProcessWindow

SEQ2SEQ, LM = facts.SEQ2SEQ, facts.LM
PHASES = {SEQ2SEQ: ["encode", "decode", "project"], LM: ["prefill", "decode"]}
STEPS_CSV = "generation_steps.csv"
PHASE_WORDS = {TTFT: "TTFT (prefill and its token)", TPOT: "TPOT (one decode step)"}


def kind_of(model, config: RunConfig) -> str:
    """Which loop a model runs, or a one-line UserError when it cannot generate."""
    if all(callable(getattr(model, name, None)) for name in ("encode", "decode", "project")):
        return SEQ2SEQ
    if isinstance(model, models.CausalLM):
        return LM
    raise UserError(
        f"--workload generate needs a model that generates: transformer (encoder-"
        f"decoder), gpt2 (decoder-only), or one with encode/decode/project methods; "
        f"{config.model} has none of these"
    )


def check_lengths(model, kind: str, inputs: tuple, config: RunConfig) -> None:
    """Lengths must fit the model's positions (``max_len``)."""
    limit = getattr(model, "max_len", None)
    if limit is None:
        return
    if kind == SEQ2SEQ:
        checks = {"--src-len": inputs[0].size(1), "--max-new-tokens": config.max_new_tokens}
        for flag, value in checks.items():
            if value > limit:
                raise UserError(f"{flag} {value} is beyond the {limit} positions of {config.model}")
    elif inputs[0].size(1) + config.max_new_tokens > limit:
        raise UserError(
            f"--prompt-len {inputs[0].size(1)} + --max-new-tokens "
            f"{config.max_new_tokens} is beyond the {limit} positions of "
            f"{config.model}"
        )


@dataclass
class Loop:
    """One generation (``generate(clock)``), and for a decoder-only LM its phases alone, each
    with its greedy token: ``prefill()`` (the TTFT's work) and ``decode()`` (the first decode
    step, run after a prefill: the TPOT's work; a static KV cache's step costs the same at
    every position), for their GPU-time windows."""

    generate: Callable[..., loops.Generation]
    prefill: Callable[[], object] | None = None
    decode: Callable[[], object] | None = None
    #: the token ``decode`` feeds the step
    token: torch.Tensor | None = None


def _loop(run: RunContext) -> tuple[Loop, dict]:
    config, backend, kind = run.config, run.backend, kind_of(run.model, run.config)
    if kind == SEQ2SEQ:
        s2s, source, notes = generation_parts.seq2seq_parts(
            backend, run.model, run.inputs[0], config, run.device
        )
        return Loop(
            lambda clock=None: loops.greedy_seq2seq(s2s, source, config.max_new_tokens, clock)
        ), notes
    parts, prompt, notes = generation_parts.lm_parts(
        backend, run.model, run.inputs[0], config, run.device
    )
    if config.cuda_graphs:
        parts = generation_parts.graphed_decode(
            parts, prompt, backend.name, run.say, notes, run.profile_captures
        )
    new = config.max_new_tokens
    # a token as a generation feeds one back (the argmax of the last step: contiguous, an
    # inference tensor): a tensor made outside inference mode, or with a prompt column's strides
    # (a plain clone keeps them), would fail a compiled step's guards and compile it again
    with torch.inference_mode():
        last = prompt[:, -1:].clone(memory_format=torch.contiguous_format)

    def prefill():
        with torch.inference_mode():
            logits, _ = parts.prefill(prompt)
            return logits.argmax(-1, keepdim=True)

    def decode():  # the first decode step: after prefill(), as in a generation
        with torch.inference_mode():
            logits, _ = parts.step(last, prompt.size(1), parts.cache)
            return logits.argmax(-1, keepdim=True)

    return Loop(
        lambda clock=None: loops.greedy_lm(parts, prompt, new, clock),
        prefill,
        decode if new > 1 else None,
        last,
    ), notes


class Generate:
    """One step is one greedy generation; the harness turns what it measures into a RunResult
    with its ``generation`` block and the generation numerics."""

    first_call = "first generation"
    iterations = "generations"
    unit: str | None = "one whole generation"
    sync = "every generation (device marks per token)"
    counts_flops = False  # a generation's work is not one forward: no roofline is claimed

    #: --cuda-graphs captures the decode step here, not the whole step in the harness
    captures_graphs = True

    def __init__(self, run: RunContext) -> None:
        config = run.config
        self.run = run
        self.kind = kind_of(run.model, config)
        check_lengths(run.model, self.kind, run.inputs, config)
        if config.cuda_graphs and self.kind != LM:
            raise UserError(
                "--cuda-graphs with --workload generate captures a decoder-only LM's decode "
                f"step (gpt2, llama); {config.model} is an encoder-decoder, whose decoder "
                "input grows token by token"
            )
        if config.target_noise is not None:
            raise UserError(
                "--target-noise samples forward windows; it does not apply to "
                "--workload generate yet"
            )
        self.label = " generate"
        self.phase_spans: list[str] | None = PHASES[self.kind]
        self.figures_of: dict | None = None
        self.loop: Loop | None = None
        self.phase_gpu: dict[str, GpuCompute] | None = None
        self.phase_inputs: dict | None = None

    def before_prepare(self, timer) -> None:
        """A decoder-only LM's phases counted for the roofline (FLOPs and minimum bytes of a
        prefill and of one decode step, on the meta device: profiler.collect.flops); the
        numeric reference is a fresh FP32 build (check_generation)."""
        run = self.run
        if self.kind == LM:
            with timer("flops"):
                hf_model: Any = run.model.model  # (a CausalLM: kind_of)
                self.phase_inputs = flops.lm_phase_inputs(
                    hf_model,
                    run.config.batch_size,
                    run.inputs[0].size(1),
                    run.config.max_new_tokens,
                    run.backend.precision,
                )

    def prepare(self) -> Prepared:
        """The backend's parts of the loop (compiled or built here): one generation per call,
        marked on ``clock`` when one is given."""
        self.loop, notes = _loop(self.run)
        return Prepared(fn=self.loop.generate, inputs=(), notes=notes)

    def time(self, step: Prepared, iters: int, use_cuda: bool, tick, deadline=None):
        per_generation = _timed(step.fn, iters, use_cuda, self.kind, tick, deadline)
        return [g["sequence_ms"] for g in per_generation], per_generation, None

    def figures(self, window: TimedWindow, per_generation) -> str:
        config = self.run.config
        self.figures_of = generation_figures(
            per_generation, config.batch_size, config.max_new_tokens
        )
        figures = self.figures_of
        tpot = figures["tpot_ms"]["p50"]
        return (
            f"TTFT p50 {units.time(figures['ttft_ms']['p50'], thousands=False)}"
            + (f", TPOT p50 {units.time(tpot, thousands=False)}" if tpot is not None else "")
            + (
                f", ITL p50/p99 "
                f"{units.time(figures['per_token_ms']['p50'], thousands=False, labelled=False)}/"
                f"{units.time(figures['per_token_ms']['p99'], thousands=False)}"
                if figures["per_token_ms"]["count"]
                else ""
            )
            + f", {units.number(figures['tokens_per_s'], thousands=False)} tokens/s"
        )

    def phase_windows(self, timed_details, use_cuda: bool) -> dict[str, ProcessWindow]:
        """The timed window's phases as windows of their own (profiler.runs.samples: TTFT, and
        TPOT when a generation has decode steps): per generation its latency and, on a GPU,
        its enqueue; each phase's GPU time in a window of its own (a decoder-only LM's
        prefill and decode step, profiler.collect.gpu_time), as many iterations."""
        per_generation = timed_details
        figures = phase_figures(per_generation, use_cuda)
        loop = self.loop
        calls = {TTFT: loop.prefill if loop else None, TPOT: loop.decode if loop else None}
        windows: dict[str, ProcessWindow] = {}
        self.phase_gpu = {}
        for phase, (latency, enqueue) in figures.items():
            gpu_ms: tuple[float, ...] = ()
            call = calls[phase]
            if use_cuda and call is not None:
                measured = gpu_time.measure(
                    call,
                    (),
                    len(latency),
                    use_cuda,
                    workload=None,
                    enqueue_ms=enqueue,
                    # a decode step needs the state a prefill leaves (its cache position)
                    setup=loop.prefill if loop and phase == TPOT else None,
                )
                self.phase_gpu[phase] = measured.figures
                gpu_ms = measured.gpu_ms
            windows[phase] = ProcessWindow(tuple(latency), gpu_ms, tuple(enqueue))
        itl = [ms for g in per_generation for ms in g["step_ms"][1:]]
        if itl:
            windows[ITL] = ProcessWindow(tuple(itl))
        for phase, gpu in self.phase_gpu.items():
            if gpu.not_measured is None:
                self.run.say(
                    f"  {PHASE_WORDS[phase]}: GPU time p50 "
                    f"{units.time(gpu.gpu_p50_ms, thousands=False, labelled=False)} "
                    f"ms, enqueue p50 {units.time(gpu.enqueue_p50_ms, thousands=False)}"
                )
        return windows

    def check(self, step: Prepared, output) -> tuple[dict, object]:
        run = self.run
        # a fresh generation, cloned at once: CUDA graphs (reduce-overhead) and engines may
        # reuse their output buffers on the next call
        generated = _cloned(step.fn())
        result = check_generation(
            run.config, run.backend.name, self.kind, generated, run.inputs, run.device, run.use_cuda
        )
        if "skipped" not in result:
            run.say(
                f"  numerics vs FP32 eager: first-step logits rel L2 "
                f"{units.significant(result['rel_l2_error'])}, tokens equal "
                f"{units.number(result['tokens']['positions_equal'], 3, thousands=False)}"
            )
        return result, generated.tokens

    def write(self, run_stage: Path, per_generation) -> list[str]:
        _write_steps_csv(run_stage, per_generation)
        return [STEPS_CSV]

    def generation(self, window: TimedWindow, per_generation) -> dict:
        config = self.run.config
        run_dir = config.runs_dir / config.run_name
        assert self.figures_of is not None  # figures() ran first
        return {
            "kind": self.kind,
            "phases": PHASES[self.kind],
            "max_new_tokens": config.max_new_tokens,
            "input_len": self.run.inputs[0].size(1),
            "eos": "ignored: every sequence gets max_new_tokens tokens",
            "steps_csv": str(run_dir / STEPS_CSV),
            **self.figures_of,
            "phase_gpu": (
                {k: msgspec.to_builtins(v) for k, v in self.phase_gpu.items()}
                if self.phase_gpu
                else None
            ),
            "phase_roofline_inputs": (
                self.phase_inputs
                if self.phase_inputs and "error" not in self.phase_inputs
                else None
            ),
        }


def _cloned(generation: loops.Generation) -> loops.Generation:
    return loops.Generation(
        tokens=generation.tokens.clone(),
        first_logits=generation.first_logits.clone(),
        encoder_output=None
        if generation.encoder_output is None
        else generation.encoder_output.clone(),
    )


def _timed(generate, iters: int, use_cuda: bool, kind: str, tick, deadline=None):
    """Per generation: ttft_ms, encode_ms (encoder-decoder), step_ms per token, sequence_ms;
    ``iters`` of them, fewer when ``deadline`` says stop."""
    per_generation = []
    began = timing.clock()
    for done in range(1, iters + 1):
        clock = loops.Clock(use_cuda)
        generate(clock)
        gaps, host = clock.elapsed_ms(), clock.host_ms()
        if kind == SEQ2SEQ:  # start | encode | token 0 | token 1 ...
            encode_ms, steps, host_steps = gaps[0], gaps[1:], host[1:]
            ttft, ttft_host = encode_ms + steps[0], host[0] + host[1]
        else:  # start | prefill (token 0) | token 1 ...
            encode_ms, steps, host_steps = None, gaps, host
            ttft, ttft_host = steps[0], host[0]
        per_generation.append(
            {
                "ttft_ms": ttft,
                "encode_ms": encode_ms,
                "step_ms": steps,
                "sequence_ms": sum(gaps),
                "ttft_enqueue_ms": ttft_host,
                "step_enqueue_ms": host_steps,
            }
        )
        tick()
        if deadline is not None and deadline.reached(done, timing.clock() - began):
            break
    return per_generation


def _quantiles(values: list[float]) -> dict:
    if not values:
        return {"mean": None, "p50": None, "p90": None, "p99": None, "count": 0}
    ordered = sorted(values)
    return {
        "mean": sum(ordered) / len(ordered),
        "p50": percentile(ordered, 50),
        "p90": percentile(ordered, 90),
        "p99": percentile(ordered, 99),
        "count": len(ordered),
    }


def _tpot(steps: list[float]) -> float | None:
    """Time per output token of one generation: its mean step after the first token."""
    later = steps[1:]
    return sum(later) / len(later) if later else None


def phase_figures(
    per_generation: list[dict], use_cuda: bool
) -> dict[str, tuple[list[float], list[float]]]:
    """Per phase (TTFT; TPOT when generations have decode steps): each generation's latency,
    and its enqueue (the host's time to launch the phase's work; on a GPU only)."""
    found = {
        TTFT: (
            [g["ttft_ms"] for g in per_generation],
            [g["ttft_enqueue_ms"] for g in per_generation] if use_cuda else [],
        )
    }
    tpots = [t for g in per_generation if (t := _tpot(g["step_ms"])) is not None]
    if tpots:
        found[TPOT] = (
            tpots,
            [t for g in per_generation if (t := _tpot(g["step_enqueue_ms"])) is not None]
            if use_cuda
            else [],
        )
    return found


def generation_figures(per_generation: list[dict], batch_size: int, new_tokens: int) -> dict:
    """TTFT, TPOT (each generation's mean step after the first token), encode, ITL (every
    token after the first), sequence latency, tokens/s and the mean step time per token
    position, from the per-generation marks."""
    sequences = [g["sequence_ms"] for g in per_generation]
    tpots = [t for g in per_generation if (t := _tpot(g["step_ms"])) is not None]
    later_steps = [ms for g in per_generation for ms in g["step_ms"][1:]]
    encodes = [g["encode_ms"] for g in per_generation if g["encode_ms"] is not None]
    mean_sequence = sum(sequences) / len(sequences)
    positions = [
        sum(g["step_ms"][k] for g in per_generation) / len(per_generation)
        for k in range(new_tokens)
    ]
    return {
        "ttft_ms": _quantiles([g["ttft_ms"] for g in per_generation]),
        "encode_ms": _quantiles(encodes) if encodes else None,
        "per_token_ms": _quantiles(later_steps),
        "tpot_ms": _quantiles(tpots),
        "sequence_ms": _quantiles(sequences),
        "tokens_per_s": batch_size * new_tokens / (mean_sequence / 1000.0),
        "step_ms_by_position": positions,
        "generations": len(per_generation),
    }


def _write_steps_csv(run_stage: Path, per_generation: list[dict]) -> None:
    """generation_steps.csv: one token step per row (latency.csv, one whole generation per
    row like a forward run's, is the pipeline's)."""
    steps = io.StringIO()
    writer = csv.writer(steps, lineterminator="\n")
    writer.writerow(["generation", "position", "step_ms", "ttft_ms", "encode_ms"])
    for i, g in enumerate(per_generation):
        for position, ms in enumerate(g["step_ms"]):
            writer.writerow(
                [
                    i,
                    position,
                    units.time(ms, decimals=6, thousands=False, labelled=False),
                    units.time(g["ttft_ms"], decimals=6, thousands=False, labelled=False),
                    ""
                    if g["encode_ms"] is None
                    else units.time(g["encode_ms"], decimals=6, thousands=False, labelled=False),
                ]
            )
    write_text_atomic(run_stage / STEPS_CSV, steps.getvalue())


# --------------------------------------------------------------------------------------------
# numerics


def token_agreement(tokens, reference) -> dict:
    """Share of (sequence, position) tokens equal, and share of sequences identical."""
    equal = tokens.to(reference.device) == reference
    return {
        "positions_equal": float(equal.double().mean().item()),
        "sequences_identical": float(equal.all(dim=1).double().mean().item()),
        "sequences": int(tokens.size(0)),
        "positions": int(tokens.size(1)),
    }


def check_generation(
    config, backend_name: str, kind: str, output, inputs, device, use_cuda: bool
) -> dict:
    """One more generation of the backend (cloned) against a greedy generation of a fresh FP32
    eager build (same seed and weights) on the same source or prompt: encoder output
    (encoder-decoder), first-step logits, token agreement. ``rel_l2_error`` / ``finite`` at
    the top are the first-step logits', which --max-rel-error checks."""
    if backend_name == REFERENCE_BACKEND:
        return {"skipped": f"{REFERENCE_BACKEND} is the FP32 eager reference itself"}
    reference_model: Any  # one that generates (kind_of): encode/decode/project, or a CausalLM
    reference_model, _ = models.build(config, device)
    reference_model = reference_model.to(device=device, dtype=torch.float32)
    source = inputs[0].to(device)
    if kind == SEQ2SEQ:
        s2s = loops.Seq2SeqParts(
            reference_model.encode, reference_model.decode, reference_model.project
        )
        reference = loops.greedy_seq2seq(s2s, source, config.max_new_tokens)
    else:
        lm = loops.lm_parts(
            reference_model.model,
            source.size(0),
            source.size(1),
            config.max_new_tokens,
            device,
            torch.float32,
            static_cache=False,
        )
        reference = loops.greedy_lm(lm, source, config.max_new_tokens)
    sync(use_cuda)
    logits = numerics.compare(output.first_logits.float(), reference.first_logits)
    result = {
        "first_step_logits": logits,
        "encoder_output": None
        if output.encoder_output is None
        else numerics.compare(output.encoder_output.float(), reference.encoder_output),
        "tokens": token_agreement(output.tokens, reference.tokens),
        "finite": logits["finite"],
        "rel_l2_error": logits["rel_l2_error"],
        "max_abs_error": logits["max_abs_error"],
        "mean_abs_error": logits["mean_abs_error"],
        "cosine_similarity": logits["cosine_similarity"],
        "top1_agreement": logits["top1_agreement"],
        "reference": {
            "backend": REFERENCE_BACKEND,
            "how": "greedy generation of a fresh FP32 eager build (same seed "
            "and weights) on the same source/prompt",
            "device": str(device),
            "tf32": config.tf32,
        },
    }
    del reference_model
    return result
