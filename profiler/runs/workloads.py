"""The workloads as facts: what the rest of the package asks of a workload by its name, before
anything is imported (the run's folder name, the built-in models' inputs, --cuda-graphs, the
GPU-time window, sampling in fresh processes). Torch-free data, read by the run's config, the
collection, the sweep, compare and advise; ``profiler.collect.workloads`` implements each name
(what one step is, how it is timed and checked: profiler.collect.workloads.protocol.Workload).

A new workload is one row in ``WORKLOADS`` plus its implementation in
``profiler/collect/workloads/`` (named in profiler.collect.harness.WORKLOADS).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class WorkloadFacts:
    """What one workload is, for the code that only knows its name. A row that leaves a field
    out claims nothing: no GPU-time window, no sampling, no capture."""

    name: str  # "forward", "generate"
    # after the run's folder name when the run has no --name: "_gen"
    run_suffix: str = ""
    # the built-in models' inputs are a generation's prompts (--src-len, --prompt-len tokens:
    # profiler.collect.models), not a forward pass's batch (--seq-len)
    prompts: bool = False
    # why --cuda-graphs cannot capture one step (profiler.collect.cuda_graphs); None: it can
    # (every step has the same shapes), and advise tries it on a launch-bound run
    not_captured: str | None = "its steps are not known to keep their shapes"
    # the GPU-time window after the timed one measures its step (profiler.collect.gpu_time)
    gpu_time: bool = False
    # its timed windows may be sampled in fresh processes (--processes, --target-noise; advise
    # --try's rounds and its baseline's second window)
    sampled: bool = False


#: every workload, by name (the --workload choices, in this order)
WORKLOADS: dict[str, WorkloadFacts] = {
    w.name: w
    for w in (
        # one forward pass per step
        WorkloadFacts("forward", not_captured=None, gpu_time=True, sampled=True),
        # one greedy generation per step (transformer, an encoder-decoder; gpt2, a decoder-only LM)
        WorkloadFacts(
            "generate",
            run_suffix="_gen",
            prompts=True,
            # a decoder-only LM's decode step is captured (an encoder-decoder's grows: the
            # workload refuses it in one line)
            not_captured=None,
            # its processes keep TTFT and TPOT windows beside the whole generation's
            sampled=True,
        ),
    )
}


def workload(name: str) -> WorkloadFacts:
    """A workload's facts; a name not in WORKLOADS (a result written by another version, a
    workload a test registered) claims nothing."""
    return WORKLOADS.get(name) or WorkloadFacts(name)
