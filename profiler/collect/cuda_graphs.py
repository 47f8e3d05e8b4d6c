"""--cuda-graphs: the forward step captured into one ``torch.cuda.CUDAGraph`` after the backend is
prepared; the timed, profiled and checked calls are its replays. It gives the latency a user
gets once the host's launch overhead is gone.

How: after prepare and its first call, ``WARMUP_CALLS`` more calls on a side stream (the
pattern torch.cuda.graph's documentation asks for: lazy initialisation, cuDNN's autotuning and
the allocator's first blocks happen outside the capture), then one call captured under
``torch.cuda.graph`` on the run's fixed input tensors (the static inputs; a replay given other
tensors copies them in first). A replay returns the output tensors written during the capture
(the static output), which each replay rewrites. Before the run goes on, one replay is checked:
the output is filled with NaN, replayed, and compared with a plain call's output (relative L2
error at most ``REPLAY_TOLERANCE``): a replay that does not rewrite the output (the backend's
work runs outside the captured stream) or writes something else is refused, not timed. The
check's outcome is the backend note ``cuda_graphs`` in result.json.

Refused before anything is built, in one line naming the backend: no CUDA GPU; --workload
generate (one generation's shapes change token by token); an inductor backend with
--compile-mode reduce-overhead or max-autotune (torch.compile already replays CUDA graphs
there). A capture that fails (an error while capturing or in the replay check) is one line
naming the backend and the first line of the error; running out of memory stays an
out-of-memory error.

What each backend family does, as seen on an H100 (torch 2.11.0+cu130, TensorRT-RTX 1.4.0.76;
docs/gpu/h100/reproduce/features.log, ResNet50 bs 8):

- pytorch (eager): captures; the replay check passes (relative L2 error 0). FP32: p50 4.058 ms
  replayed against 4.287 ms launched, enqueue 0.013 ms against 3.316 ms.
- inductor (torch.compile, --compile-mode default): captures; FP16 p50 0.753 ms replayed
  (GPU compute 0.731 ms); reduce-overhead and max-autotune are refused (see above).
- tensorrt (Torch-TensorRT on TensorRT-RTX): captures, and the replays time (FP16 p50 0.698 ms
  against 0.853 ms launched), but the process then died with a segmentation fault in the
  profiled steps under torch.profiler; so --cuda-graphs with --capture torch is refused for
  this family, in one line; with --capture cuda-profiler-api it is tried (not run on a GPU).
- torchscript: expected to capture once the profiling executor has optimized the graph in the
  warm-up calls; not run on a GPU.
- onnxruntime (CUDA EP with IO binding): tried; ONNX Runtime runs on its own stream and
  synchronizes, so the capture or the replay check is expected to refuse it: not run on a GPU.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from profiler import units
from profiler.collect import numerics
from profiler.collect.backends.base import Backend, Prepared
from profiler.collect.device import out_of_memory_kind
from profiler.collect.graph_capture import INDUCTOR_GRAPH_MODES, CaptureProfile
from profiler.errors import UserError, first_line
from profiler.notices import Say
from profiler.runs.config import RunConfig
from profiler.runs.workloads import workload

#: calls on a side stream before the capture (after prepare's first call)
WARMUP_CALLS = 3
#: a replay's output against a plain call's: at most this relative L2 error (the same kernels
#: give the same numbers; this catches an output a replay did not write)
REPLAY_TOLERANCE = 1e-2


class NotReplayable(Exception):
    """A captured graph whose replay does not give the call's output."""


def refusal(config: RunConfig, family: str, use_cuda: bool) -> str | None:
    """Why this run cannot be captured, known before anything is built; None when it may."""
    if not use_cuda:
        return "CUDA graphs need a CUDA GPU, and torch sees none on this machine"
    why = workload(config.workload).not_captured
    if why is not None:
        return f"--workload {config.workload} is not captured ({why})"
    if family == "tensorrt" and config.capture == "torch":
        return (
            "a TensorRT engine replayed from a CUDA graph crashed the process under "
            "torch.profiler (segmentation fault, H100, TensorRT-RTX 1.4); time it without "
            "--cuda-graphs, or with --capture cuda-profiler-api under nsys"
        )
    if family == "inductor" and config.compile_mode in INDUCTOR_GRAPH_MODES:
        return (
            f"--compile-mode {config.compile_mode} already replays CUDA graphs "
            "(torch.compile's cudagraph trees); use --compile-mode default or "
            "max-autotune-no-cudagraphs"
        )
    return None


def check(config: RunConfig, backend: Backend, use_cuda: bool) -> None:
    """Refuse, in one line naming the backend, a run that cannot be captured (see refusal)."""
    why = refusal(config, backend.family, use_cuda)
    if why is not None:
        raise UserError(f"--cuda-graphs: {backend.name} cannot be captured here: {why}")


def error_line(error: BaseException, limit: int = 240) -> str:
    """An exception as one line: its type and the first non-blank line of its message."""
    line = first_line(error).strip()
    text = f"{type(error).__name__}: {line}" if line else type(error).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."


def capture(
    step: Prepared,
    backend_name: str,
    say: Say,
    what: str = "the forward step",
    profiled: bool = True,
    reset: Callable[[], object] | None = None,
) -> Prepared:
    """The step with ``fn`` replaced by the replay of its capture (see the module doc); a
    one-line UserError naming the backend when it cannot be captured. The capture runs under
    a profiler (unless not ``profiled``: a process that only times), whose windows go into the
    notes' artifacts (graph_captures.json: profiler.collect.graph_capture)."""
    began = time.perf_counter()
    profile = CaptureProfile(f"--cuda-graphs: {what}", enabled=profiled)
    try:
        replay, checked = _capture(step.fn, step.inputs, profile, reset)
    except NotReplayable as why:
        raise UserError(f"--cuda-graphs: {backend_name} could not be captured: {why}") from None
    except Exception as error:
        if out_of_memory_kind(error) is not None:
            raise
        raise UserError(
            f"--cuda-graphs: {backend_name} could not be captured: {error_line(error)}"
        ) from None
    seconds = time.perf_counter() - began
    note = (
        f"{what} captured into one CUDA graph after {WARMUP_CALLS} warm-up calls "
        f"on a side stream ({units.time(seconds, 's', decimals=2, thousands=False)}); timed, "
        "profiled and checked "
        f"calls are its replays; {checked}"
    )
    say(
        f"  captured into a CUDA graph in "
        f"{units.time(seconds, 's', decimals=2, thousands=False)}: the calls from here "
        f"on are replays ({checked})"
    )
    artifacts = {**step.notes.get("artifacts", {}), **profile.artifacts()}
    return Prepared(
        fn=replay,
        inputs=step.inputs,
        notes={
            **step.notes,
            "cuda_graphs": note,
            "graph_captures": profile.summary(),
            "artifacts": artifacts,
        },
        after_windows=step.after_windows,
    )


def _capture(
    fn: Callable[..., Any],
    inputs: tuple,
    profile: CaptureProfile,
    reset: Callable[[], object] | None = None,
) -> tuple[Callable[..., Any], str]:
    """``reset``: puts back the state the step reads (a KV cache's position), called before
    the plain call the replay is checked against and before that replay."""
    import torch

    torch.cuda.synchronize()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(WARMUP_CALLS):
            plain = fn(*inputs)
        if reset is not None:
            reset()
            plain = fn(*inputs)
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    expected = numerics.first_tensor(plain)
    expected = None if expected is None else expected.clone()  # an engine may reuse its buffers
    graph = torch.cuda.CUDAGraph()
    with profile.recording(), torch.cuda.graph(graph):
        static_output = fn(*inputs)
    if reset is not None:
        reset()
        torch.cuda.synchronize()
    checked = _check_replay(torch, graph, static_output, expected, inputs)

    def replay(*args):
        if args and len(args) != len(inputs):
            raise ValueError(f"the captured step takes {len(inputs)} inputs, not {len(args)}")
        for given, static in zip(args, inputs):
            if given is not static and isinstance(static, torch.Tensor):
                static.copy_(given)
        graph.replay()
        return static_output

    return replay, checked


def _check_replay(torch, graph, static_output, expected, inputs: tuple) -> str:
    """Replay once; where the output can be checked, with it filled with NaN first and compared
    with a plain call's. Raises NotReplayable; returns what was checked, in words."""
    out = numerics.first_tensor(static_output)
    why_unchecked = None
    if out is None or expected is None:
        why_unchecked = "the output holds no tensor"
    elif not out.is_floating_point():
        why_unchecked = "the output is not a floating-point tensor"
    elif any(
        isinstance(t, torch.Tensor)
        and t.untyped_storage().data_ptr() == out.untyped_storage().data_ptr()
        for t in inputs
    ):
        why_unchecked = "the output shares memory with an input"
    elif not bool(torch.isfinite(expected).all()):
        why_unchecked = "a plain call's output is not finite"
    if why_unchecked is None:
        with torch.inference_mode():
            out.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    if why_unchecked is not None:
        return f"the replay was not checked ({why_unchecked})"
    figures = numerics.compare(out, expected)
    if not figures["finite"]:
        raise NotReplayable(
            "a replay did not rewrite the output (the backend's work runs "
            "outside the captured stream)"
        )
    rel = figures["rel_l2_error"]
    if rel is None or rel > REPLAY_TOLERANCE:
        raise NotReplayable(
            f"a replay's output differs from a plain call's (relative L2 error "
            f"{units.significant(rel)}, more than {units.plain(REPLAY_TOLERANCE)})"
        )
    return (
        "a replay rewrote the output and matches a plain call (relative L2 error "
        f"{units.significant(rel, 2)})"
    )
