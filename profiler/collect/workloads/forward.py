"""--workload forward (the default): one step is one forward pass of the backend's callable on
the batch, timed with CUDA events around it (perf_counter on a CPU) and synchronized, and
checked against the FP32 eager reference (profiler.collect.reference: computed from the
measured model's own weights, copied to the host before prepare, or loaded from the reference
cache)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rich.markup import escape

from profiler import units
from profiler.analysis.timed_window import TimedWindow
from profiler.collect import numerics, reference as fp32_reference, timing
from profiler.collect.backends.base import Prepared
from profiler.collect.device import out_of_memory_kind, release_cuda_memory
from profiler.collect.workloads.protocol import RunContext
from profiler.runs.backends import REFERENCE_BACKEND
from profiler.runs.phases import Phases
from profiler.runs.samples import ProcessWindow


@dataclass(frozen=True)
class ForwardDetails:
    """Per timed call: the host's time to return from it (enqueue, ms; empty on a CPU)."""

    enqueue_ms: tuple[float, ...] = ()


class Forward:
    label = ""
    first_call = "first call"
    iterations = "iterations"
    unit: str | None = None
    sync = "every iteration"
    phase_spans: list[str] | None = None
    counts_flops = True
    captures_graphs = False

    def __init__(self, run: RunContext) -> None:
        self.run = run
        self.reference: fp32_reference.Reference | None = None

    def before_prepare(self, timer: Phases) -> None:
        if self.run.backend.name != REFERENCE_BACKEND:  # the FP32 weights, before the cast
            with timer("numerics"):
                self.reference = fp32_reference.prepare(self.run.config, self.run.model)

    def prepare(self) -> Prepared:
        run = self.run
        return run.backend.prepare(run.model, run.inputs, run.config, run.device)

    def time(self, step: Prepared, iters: int, use_cuda: bool, tick, deadline=None):
        """The latencies; the details hold each call's enqueue time (ms, on a GPU)."""
        enqueue: list[float] = []
        latencies, output = timing.time_iterations(
            step.fn, step.inputs, iters, use_cuda, tick, enqueue if use_cuda else None, deadline
        )
        return latencies, ForwardDetails(tuple(enqueue)), output

    def figures(self, window: TimedWindow, details) -> str:
        return f"p50 {units.time(window.p50_ms, thousands=False)}"

    def check(self, step: Prepared, output) -> tuple[dict, object]:
        run = self.run
        result = check_numerics(
            run.config,
            run.backend.name,
            step.fn,
            step.inputs,
            run.device,
            run.use_cuda,
            self.reference,
        )
        if "skipped" not in result:
            run.say(
                f"  numerics vs FP32 eager: relative L2 error "
                f"{units.significant(result['rel_l2_error'])}, max abs error "
                f"{units.significant(result['max_abs_error'])} (reference "
                f"{result['reference']['source']})"
            )
        elif "reason" in result:
            run.say(
                f"  [yellow]numerics: skipped ({result['skipped']}):[/] {escape(result['reason'])}"
            )
        return result, output

    def write(self, run_stage: Path, details) -> list[str]:
        return []

    def generation(self, window: TimedWindow, details) -> None:
        return None

    def phase_windows(self, details, use_cuda: bool) -> dict[str, ProcessWindow]:
        return {}


def check_numerics(
    config,
    backend_name: str,
    fn,
    inputs: tuple,
    device,
    use_cuda: bool,
    reference: fp32_reference.Reference | None,
) -> dict:
    """Compare one more call of the backend with the FP32 eager reference.

    ``reference`` (profiler.collect.reference, prepared before the backend saw the model; None
    for the reference backend itself) holds the measured model's FP32 weights: its output is
    loaded from the reference cache, or computed by a fresh build holding those weights on the
    same device with TF32 as --tf32 set it, on this run's inputs cast back to float32, so both
    see identical input values.
    """
    if backend_name == REFERENCE_BACKEND:
        return {"skipped": f"{REFERENCE_BACKEND} is the FP32 eager reference itself"}
    assert reference is not None  # prepared for every other backend (before_prepare)
    # a fresh call, cloned: an engine may reuse its output buffers across calls
    output = numerics.first_tensor(fn(*inputs))
    if output is None:
        return {"skipped": "the output is not a tensor"}
    output = output.clone()
    kind = None
    try:
        reference_output, source = reference.output(inputs, device, use_cuda)
    except Exception as error:  # FP16/BF16/TensorRT can fit batches that FP32 cannot
        kind = out_of_memory_kind(error)
        if kind is None:
            raise
    if kind is not None:  # out of the except block: the reference's frames are freed
        release_cuda_memory()
        return {
            "skipped": "reference did not fit",
            "reason": f"{kind} out of memory in the FP32 eager reference at batch size "
            f"{config.batch_size}; the measurement is kept",
        }
    result = numerics.compare(output, reference_output)
    result["reference"] = {
        "backend": REFERENCE_BACKEND,
        "how": "FP32 eager build holding the measured model's weights (copied before the "
        "backend saw them) on this run's inputs cast to float32 (contiguous)",
        "device": str(device),
        "tf32": config.tf32,
        "source": source,
        "cache_key": reference.cache_key,
        "cache": reference.cache_note,
    }
    return result
