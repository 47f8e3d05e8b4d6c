"""Whether a config recorded elsewhere can be timed again on this machine, asked before any
process is started (compare --processes, --target-noise): the device it was recorded on against
the one torch sees here, and the checks `run` makes (the backend's extras and GPU, CUDA graphs).
Imports torch (what the timing children will use is what decides)."""

from __future__ import annotations

from dataclasses import dataclass

from profiler.runs.config import RunConfig


@dataclass(frozen=True)
class Here:
    """This machine as the timing children see it: the GPU torch uses, or None on a CPU."""

    gpu: str | None

    @property
    def words(self) -> str:
        return self.gpu or "the CPU"


def this_machine() -> Here:
    import torch

    return Here(torch.cuda.get_device_name() if torch.cuda.is_available() else None)


def _recorded_words(device: str, gpu: str | None) -> str:
    if device.startswith("cpu"):
        return "the CPU"
    return f"{device} ({gpu})" if gpu else device


def refusal(config: RunConfig, device: str, gpu: str | None, here: Here) -> str | None:
    """Why ``config``, recorded on ``device`` (``gpu``: its GPU's name), cannot be timed again
    on this machine, in the words of `run` where it refuses the same; None when it can."""
    from profiler.collect import backends, cuda_graphs

    recorded = _recorded_words(device, gpu)
    on_gpu = here.gpu is not None
    if not device.startswith("cpu") and not on_gpu:
        return (
            f"it was recorded on {recorded}; this machine has no GPU torch can use, so its "
            "config would be timed on the CPU"
        )
    if device.startswith("cpu") and on_gpu:
        return (
            f"it was recorded on the CPU; this machine has a GPU ({here.gpu}), where its "
            "config would be timed: hide it (CUDA_VISIBLE_DEVICES=) to time both on the CPU"
        )
    backend = backends.get(config.backend)
    reason = backend.unavailable_reason(on_gpu)
    if reason:
        return f"backend {backend.name} cannot run here: {reason}"
    if config.cuda_graphs:
        why = cuda_graphs.refusal(config, backend.family, on_gpu)
        if why is not None:
            return f"--cuda-graphs: {backend.name} cannot be captured here: {why}"
    return None


def elsewhere(device: str, gpu: str | None, here: Here) -> str | None:
    """The device a config was recorded on, when it is another one than this machine's."""
    if device.startswith("cpu") and here.gpu is None:
        return None
    return None if gpu == here.gpu else _recorded_words(device, gpu)
