"""The FP32 eager reference a backend's output is compared with (the numeric check).

It is made from the measured model's own weights: before the backend casts or compiles the model,
``prepare`` copies its state to the host. After the windows, a fresh build of the model takes
that state (so the weights are identical, wherever they were initialised) and runs in FP32 on
this run's inputs cast to float32, and its output is stored in the reference cache
(``<engine cache>/references/``, keyed like the engines: model and its code, weights digest,
seed, batch size, the reference's input shapes, dtypes and digest, TF32 and cuDNN settings,
device, library versions). A later run of any backend on the same model, weights and input values
loads the output instead (an FP16 backend's inputs are rounded to FP16, so the FP16 backends
share one entry and the FP32 ones another). ``--no-cache`` neither reads nor writes it. Only
built-in models are cached: a package.module:function model's code can change under the same
weights, so its reference is always computed. An entry that cannot be read (cut short, corrupt)
is computed again and replaced."""

from __future__ import annotations

import dataclasses
import platform
from pathlib import Path

import torch

from profiler.collect import engine_cache, models
from profiler.errors import first_line
from profiler.runs.config import RunConfig

CACHE_KIND = "references"
CACHE_SUFFIX = ".pt"
CACHE_SCHEMA = 1
COMPUTED, LOADED = "computed", "loaded"


@dataclasses.dataclass
class Reference:
    """The reference of one run: the host copy of the measured model's state (taken before the
    backend saw the model), its digest, and where the reference cache is (None: not cached)."""

    config: RunConfig
    state: dict
    weights_sha256: str | None = None
    cache_dir: Path | None = None
    cache_key: str | None = None
    cache_note: str = ""  # "hit", "stored", or why the cache was not used

    def output(self, inputs: tuple, device, use_cuda: bool) -> tuple[torch.Tensor, str]:
        """The reference output for ``inputs`` (this run's inputs, cast to float32 here: an
        FP16 backend's inputs are the FP16-rounded values, so the reference sees the same
        values) and whether it was computed or loaded from the cache; a computed one is stored
        (a failure to store is noted)."""
        reference_inputs = fp32_inputs(inputs, device)
        facts = None
        cache_dir = self.cache_dir
        if cache_dir is not None:
            facts = cache_facts(self.config, self.weights_sha256, reference_inputs, device)
            self.cache_key = engine_cache.cache_key(facts)
            loaded, self.cache_note = load(cache_dir, facts)
            if loaded is not None:
                return loaded.to(device), LOADED
        output = compute(self.config, self.state, reference_inputs, device, use_cuda)
        if cache_dir is not None and facts is not None:
            self._store(cache_dir, facts, output)
        return output, COMPUTED

    def _store(self, cache_dir: Path, facts: dict, output: torch.Tensor) -> None:
        host = output.detach().cpu().contiguous()
        try:
            engine_cache.store(
                cache_dir,
                facts,
                lambda tmp: torch.save(host, tmp),
                report={"shape": list(host.shape)},
                suffix=CACHE_SUFFIX,
            )
            self.cache_note = "stored"
        except Exception as error:  # a full disk, an unwritable folder: the run goes on
            self.cache_note = f"not stored ({type(error).__name__}: {first_line(error)})"


def snapshot(model: torch.nn.Module) -> dict:
    """The model's state dict copied to the host (copies, even of CPU tensors: a backend may
    change the model's tensors in place)."""
    return {name: t.detach().to("cpu", copy=True) for name, t in model.state_dict().items()}


def prepare(config: RunConfig, model: torch.nn.Module) -> Reference:
    """Before the backend sees ``model``: its state copied to the host and, where the
    reference may be cached, hashed for the cache key."""
    reference = Reference(config, snapshot(model))
    if not config.use_cache:
        reference.cache_note = "--no-cache"
    elif not models.is_builtin(config):
        reference.cache_note = "not cached for a package.module:function model"
    else:
        reference.weights_sha256 = engine_cache.state_dict_digest(model, reference.state)
        reference.cache_dir = engine_cache.entries_dir(config.cache_dir, CACHE_KIND)
    return reference


def fp32_inputs(inputs: tuple, device) -> tuple:
    """The inputs the reference gets: floating-point ones cast to float32, all on ``device`` in
    the plain (contiguous) layout of FP32 eager."""
    return tuple(
        (
            t.to(device=device, dtype=torch.float32) if t.is_floating_point() else t.to(device)
        ).contiguous()
        for t in inputs
    )


def cache_facts(config: RunConfig, weights_sha256: str | None, inputs: tuple, device) -> dict:
    """Everything that decides the reference output; its cache key is made of these."""
    return {
        "kind": "fp32_reference",
        "schema": CACHE_SCHEMA,
        **models.build_facts(config, inputs),
        "weights_sha256": weights_sha256,
        "seed": config.seed,
        "batch_size": config.batch_size,
        "inputs_sha256": engine_cache.state_digest({str(i): t for i, t in enumerate(inputs)}),
        "tf32": config.tf32,
        "cudnn_benchmark": config.cudnn_benchmark,
        **device_facts(device),
    }


def device_facts(device) -> dict:
    """The device the reference runs on, in the engine cache's environment fact names."""
    device = torch.device(device)
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        return {
            "gpu": props.name,
            "compute_capability": f"{props.major}.{props.minor}",
            "cuda": torch.version.cuda,
            "cudnn": torch.backends.cudnn.version(),
        }
    return {"gpu": None, "device": f"{device.type} {platform.machine()}"}


def load(cache_dir: Path, facts: dict) -> tuple[torch.Tensor | None, str]:
    """The cached output for ``facts`` (on the host), or None and why not."""
    found = engine_cache.lookup(cache_dir, facts, CACHE_SUFFIX)
    if not found.hit:
        return None, found.reason
    try:
        output = torch.load(found.module_path, map_location="cpu", weights_only=True)
    except Exception as error:  # cut short or corrupt: computed again and replaced
        return None, f"entry {found.key} unreadable ({type(error).__name__}): computed again"
    if not isinstance(output, torch.Tensor):
        return None, f"entry {found.key} holds no tensor: computed again"
    return output, "hit"


def compute(config: RunConfig, state: dict, inputs: tuple, device, use_cuda: bool) -> torch.Tensor:
    """A fresh build of the model holding ``state`` (the measured model's weights), in FP32 on
    ``device``, called once on ``inputs`` (``fp32_inputs``)."""
    reference_model, _ = models.build(config, device, load=False)
    reference_model.load_state_dict(state)
    reference_model = reference_model.to(device=device, dtype=torch.float32)
    with torch.inference_mode():
        output = reference_model(*inputs)
    tensors = (
        [output]
        if isinstance(output, torch.Tensor)
        else [
            t
            for t in (output if isinstance(output, (tuple, list)) else [])
            if isinstance(t, torch.Tensor)
        ]
    )
    if use_cuda:
        torch.cuda.synchronize()
    return tensors[0].detach()
