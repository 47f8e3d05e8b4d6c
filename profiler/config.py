"""Every knob of a run in one validated, frozen place."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .errors import UserError

# A run name becomes a folder under runs/ and tb_logs/: keep it a single, plain path component.
_SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")

COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
MEMORY_FORMATS = ("auto", "channels_last", "contiguous")
# how the profiled steps are captured: torch.profiler (a Kineto trace), or only
# cudaProfilerStart/Stop around the active steps for an outside profiler (nsys, ncu), which then
# owns CUPTI alone (CUPTI takes one subscriber)
CAPTURES = ("torch", "cuda-profiler-api")
# forward: one forward pass per step; generate: one greedy generation per step (models that
# generate: transformer, an encoder-decoder; gpt2, a decoder-only LM)
WORKLOADS = ("forward", "generate")


def check_path_component(value: str, what: str) -> str:
    """Reject anything that could escape the folder it is joined to (``..``, ``/``, ``~``)."""
    if not _SAFE_NAME.fullmatch(value) or ".." in value:
        raise UserError(
            f"{what} {value!r} is not a plain folder name: use letters, digits, '.', '_' and '-' "
            "(no '/', no '..', not starting with '.')"
        )
    return value


@dataclass(frozen=True)
class RunConfig:
    """One model x backend x batch size, and how to profile and time it."""

    backend: str = "pytorch_fp32"
    batch_size: int = 8
    model: str = "resnet50"
    image_size: int = 224
    seq_len: int = 128
    seed: int = 0
    weights: Path | None = None
    compile_mode: str = "default"
    memory_format: str = "auto"
    tf32: bool = False
    cudnn_benchmark: bool = True
    # torch.profiler schedule
    wait: int = 1
    warmup: int = 1
    active: int = 3
    repeat: int = 1
    record_shapes: bool = False
    profile_memory: bool = False
    with_stack: bool = False
    with_flops: bool = False
    gzip: bool = True
    # timed window
    iters: int = 100
    timed_warmup: int = 20
    # where results go
    name: str | None = None
    runs_dir: Path = Path("runs")
    tb_dir: Path = Path("tb_logs")
    # compiled-engine cache (ttrt_* backends): None means engine_cache.default_dir()
    cache_dir: Path | None = None
    use_cache: bool = True
    # numeric check against the FP32 eager reference: fail the run above this relative L2 error
    max_rel_error: float | None = None
    capture: str = "torch"
    # option: --workload: forward (one forward pass per step) or generate (one greedy generation
    # per step: transformer encodes once and decodes token by token; gpt2 prefills then decodes
    # with its KV cache)
    workload: str = "forward"
    # option: --src-len: source tokens of the encoder-decoder transformer (--workload generate)
    src_len: int = 64
    # option: --prompt-len: prompt tokens of a decoder-only LM such as gpt2 (--workload generate)
    prompt_len: int = 128
    # option: --max-new-tokens: tokens generated per sequence, EOS ignored (--workload generate)
    max_new_tokens: int = 64
    extra: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        positive = {"--bs": self.batch_size, "--active": self.active, "--repeat": self.repeat,
                    "--iters": self.iters, "--image-size": self.image_size, "--seq-len": self.seq_len,
                    "--src-len": self.src_len, "--prompt-len": self.prompt_len,
                    "--max-new-tokens": self.max_new_tokens}
        for flag, value in positive.items():
            if value < 1:
                raise UserError(f"{flag} must be at least 1 (got {value})")
        for flag, value in {"--wait": self.wait, "--warmup": self.warmup,
                            "--timed-warmup": self.timed_warmup}.items():
            if value < 0:
                raise UserError(f"{flag} must be 0 or more (got {value})")
        if self.compile_mode not in COMPILE_MODES:
            raise UserError(f"unknown --compile-mode {self.compile_mode!r}; choose one of: "
                            + ", ".join(COMPILE_MODES))
        if self.memory_format not in MEMORY_FORMATS:
            raise UserError(f"unknown --memory-format {self.memory_format!r}; choose one of: "
                            + ", ".join(MEMORY_FORMATS))
        if self.capture not in CAPTURES:
            raise UserError(f"unknown --capture {self.capture!r}; choose one of: "
                            + ", ".join(CAPTURES))
        if self.workload not in WORKLOADS:
            raise UserError(f"unknown --workload {self.workload!r}; choose one of: "
                            + ", ".join(WORKLOADS))
        if self.max_rel_error is not None and not self.max_rel_error >= 0:
            raise UserError(f"--max-rel-error must be 0 or more (got {self.max_rel_error})")
        if self.name is not None:
            check_path_component(self.name, "run name")

    @property
    def run_name(self) -> str:
        """``<backend>_bs<N>[_<name>]``: the folder under both runs/ and tb_logs/."""
        base = f"{self.backend}_bs{self.batch_size}"
        return f"{base}_{self.name}" if self.name else base

    @property
    def profiled_steps(self) -> int:
        return (self.wait + self.warmup + self.active) * self.repeat

    def to_dict(self) -> dict:
        data = asdict(self)
        for key in ("weights", "runs_dir", "tb_dir", "cache_dir"):
            data[key] = None if data[key] is None else str(data[key])
        data["run_name"] = self.run_name
        return data
