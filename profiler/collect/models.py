"""Models by name: each builder returns ``(model, example_inputs)`` with random weights and
random (never all-zero) inputs for one batch. Nothing is downloaded."""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import inspect
import math
import sys
import traceback
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from profiler.errors import UserError
from profiler.runs import model_source
from profiler.runs.config import RunConfig
from profiler.runs.workloads import workload

Built = tuple[nn.Module, tuple]
# example inputs are made on the host (by its seeded generator), wherever the model is built
HOST = "cpu"


def _resnet(arch: str) -> Callable[[RunConfig], Built]:
    """torchvision's ``arch(weights=None)``, from profiler.collect.resnet (same modules, weights
    and outputs under a seed; no torchvision import)."""

    def build(config: RunConfig) -> Built:
        from profiler.collect import resnet

        model = getattr(resnet, arch)()
        size = config.image_size
        images = torch.randn(config.batch_size, 3, size, size, device=HOST)
        return model, (images,)

    return build


class _LogitsOnly(nn.Module):
    """Return the logits tensor of a Hugging Face model, so every backend sees one tensor out."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return self.model(input_ids=input_ids, attention_mask=attention_mask).logits


def _distilbert(config: RunConfig) -> Built:
    try:
        from transformers import DistilBertConfig, DistilBertForSequenceClassification
    except ImportError:
        raise UserError(
            'the distilbert model needs transformers: pip install -e ".[nlp]"'
        ) from None
    hf_config = DistilBertConfig(max_position_embeddings=max(512, config.seq_len))
    hf_config.num_labels = 2
    model = _LogitsOnly(DistilBertForSequenceClassification(hf_config))
    input_ids = torch.randint(
        1, hf_config.vocab_size, (config.batch_size, config.seq_len), device=HOST
    )
    attention_mask = torch.ones(config.batch_size, config.seq_len, dtype=torch.long, device=HOST)
    return model, (input_ids, attention_mask)


class _PositionalEncoding(nn.Module):
    table: torch.Tensor  # a buffer

    def __init__(self, d_model: int, max_len: int) -> None:
        super().__init__()
        position = torch.arange(max_len).unsqueeze(1)
        div = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
        table = torch.zeros(max_len, d_model)
        table[:, 0::2] = torch.sin(position * div)
        table[:, 1::2] = torch.cos(position * div)
        self.register_buffer("table", table)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.table[: x.size(1)]


class Seq2SeqTransformer(nn.Module):
    """An ``nn.Transformer`` encoder-decoder as used for translation: token embeddings, sinusoidal
    positions, a causal mask on the target, and a projection to the target vocabulary."""

    def __init__(
        self,
        vocab: int = 10000,
        d_model: int = 512,
        heads: int = 8,
        layers: int = 6,
        max_len: int = 1024,
    ) -> None:
        super().__init__()
        self.d_model = d_model
        self.src_embed = nn.Embedding(vocab, d_model)
        self.tgt_embed = nn.Embedding(vocab, d_model)
        self.positions = _PositionalEncoding(d_model, max_len)
        self.transformer = nn.Transformer(
            d_model=d_model,
            nhead=heads,
            num_encoder_layers=layers,
            num_decoder_layers=layers,
            dim_feedforward=4 * d_model,
            dropout=0.0,
            batch_first=True,
        )
        self.generator = nn.Linear(d_model, vocab)

    @property
    def max_len(self) -> int:
        return self.positions.table.size(0)

    def encode(self, src: torch.Tensor) -> torch.Tensor:
        """Source tokens [B, S] -> encoder output ("memory") [B, S, d_model]."""
        src_x = self.positions(self.src_embed(src) * math.sqrt(self.d_model))
        return self.transformer.encoder(src_x)

    def decode(self, tgt: torch.Tensor, memory: torch.Tensor) -> torch.Tensor:
        """Target tokens [B, T] and memory -> decoder hidden states [B, T, d_model], causal:
        position t sees target positions <= t only, so tokens appended after t (or padding)
        do not change it."""
        tgt_x = self.positions(self.tgt_embed(tgt) * math.sqrt(self.d_model))
        length = tgt.size(1)
        causal = torch.triu(
            torch.full((length, length), float("-inf"), device=tgt.device, dtype=tgt_x.dtype), 1
        )
        # saying the mask is causal spares nn.Transformer a data-dependent check of the mask,
        # which graph capture (torch.export, used by Torch-TensorRT) cannot trace
        return self.transformer.decoder(tgt_x, memory, tgt_mask=causal, tgt_is_causal=True)

    def project(self, hidden: torch.Tensor) -> torch.Tensor:
        """Decoder hidden states [..., d_model] -> logits over the vocabulary [..., vocab]."""
        return self.generator(hidden)

    def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        return self.project(self.decode(tgt, self.encode(src)))


def _transformer(config: RunConfig) -> Built:
    vocab = 10000
    if workload(config.workload).prompts:  # random source tokens, and the first target token
        model = Seq2SeqTransformer(vocab=vocab, max_len=1024)
        src = torch.randint(1, vocab, (config.batch_size, config.src_len), device=HOST)
        return model, (src,)
    model = Seq2SeqTransformer(vocab=vocab, max_len=max(1024, config.seq_len))
    src = torch.randint(1, vocab, (config.batch_size, config.seq_len), device=HOST)
    tgt = torch.randint(1, vocab, (config.batch_size, config.seq_len), device=HOST)
    return model, (src, tgt)


class CausalLM(nn.Module):
    """A Hugging Face decoder-only LM returning logits only (for the forward workload); the
    generation workload uses ``.model`` with its KV cache."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model: Any = model  # a Hugging Face model: its config, its KV cache

    @property
    def max_len(self) -> int:
        hf = self.model.config
        return int(getattr(hf, "n_positions", None) or hf.max_position_embeddings)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.model(input_ids=input_ids, use_cache=False).logits


GPT2_VOCAB = 50257


def _gpt2(config: RunConfig) -> Built:
    """A GPT-2 small-shaped LM (12 layers, 768 wide, 12 heads, 1024 positions), random weights."""
    try:
        from transformers import GPT2Config, GPT2LMHeadModel
    except ImportError:
        raise UserError('the gpt2 model needs transformers: pip install -e ".[nlp]"') from None
    hf_config = GPT2Config(
        vocab_size=GPT2_VOCAB,
        n_positions=1024,
        n_embd=768,
        n_layer=12,
        n_head=12,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
    )
    model = CausalLM(GPT2LMHeadModel(hf_config))
    length = config.prompt_len if workload(config.workload).prompts else config.seq_len
    return model, (torch.randint(0, GPT2_VOCAB, (config.batch_size, length), device=HOST),)


@dataclass(frozen=True)
class LlamaShape:
    """A Llama-style decoder's shape: RMSNorm, rotary embedding, grouped-query attention
    (``kv_heads`` key/value heads shared by ``heads`` query heads), SwiGLU MLP."""

    layers: int
    hidden: int
    intermediate: int
    heads: int
    kv_heads: int
    vocab: int
    positions: int
    tied: bool = True


#: ``llama``: Llama 3.2 1B's shape (1.24 B parameters with the embedding tied to the output
#: projection), a size that keeps an H100/H200 busy in the prefill and is bandwidth-bound in
#: the decode; ``llama-tiny``: the same architecture small enough for tests on a CPU
LLAMA_SHAPES = {
    "llama": LlamaShape(16, 2048, 8192, 32, 8, 128256, 4096),
    "llama-tiny": LlamaShape(2, 64, 128, 4, 2, 512, 512),
}


def _llama(name: str) -> Callable[[RunConfig], Built]:
    """A Llama-style decoder from transformers' LlamaForCausalLM, random weights (its own
    initialisation under the run's seed), random prompt tokens."""
    shape = LLAMA_SHAPES[name]

    def build(config: RunConfig) -> Built:
        try:
            from transformers import LlamaConfig, LlamaForCausalLM
        except ImportError:
            raise UserError(
                f'the {name} model needs transformers: pip install -e ".[nlp]"'
            ) from None
        hf_config = LlamaConfig(
            vocab_size=shape.vocab,
            hidden_size=shape.hidden,
            intermediate_size=shape.intermediate,
            num_hidden_layers=shape.layers,
            num_attention_heads=shape.heads,
            num_key_value_heads=shape.kv_heads,
            max_position_embeddings=shape.positions,
            rope_parameters={"rope_type": "default", "rope_theta": 500000.0},
            tie_word_embeddings=shape.tied,
        )
        model = CausalLM(LlamaForCausalLM(hf_config))
        length = config.prompt_len if workload(config.workload).prompts else config.seq_len
        tokens = torch.randint(0, shape.vocab, (config.batch_size, length), device=HOST)
        return model, (tokens,)

    return build


MODELS: dict[str, Callable[[RunConfig], Built]] = {
    "resnet50": _resnet("resnet50"),
    "resnet18": _resnet("resnet18"),
    "distilbert": _distilbert,
    "transformer": _transformer,
    "gpt2": _gpt2,
    **{name: _llama(name) for name in LLAMA_SHAPES},
}

CONV_MODELS = {"resnet50", "resnet18"}


def _custom(spec: str, config: RunConfig) -> Built:
    module_name, _, func_name = spec.partition(":")
    # a re-timing's process: the file its parent checked, compiled from the checked bytes
    checked = model_source.checked_for(module_name)
    try:
        if checked is not None:
            module = model_source.import_checked(checked)
        else:
            module = importlib.import_module(module_name)
    except UserError:
        raise
    except Exception as error:  # any import failure is the user's module, not ours
        raise UserError(
            f"--model {spec}: cannot import {module_name!r} ({type(error).__name__}: {error})"
        ) from None
    func = getattr(module, func_name, None)
    if not callable(func):
        raise UserError(f"--model {spec}: {module_name!r} has no function {func_name!r}")
    offered = {
        "batch_size": config.batch_size,
        "image_size": config.image_size,
        "seq_len": config.seq_len,
        "src_len": config.src_len,
        "prompt_len": config.prompt_len,
    }
    params = inspect.signature(func).parameters
    kwargs = {key: value for key, value in offered.items() if key in params}
    built = func(**kwargs)
    if not isinstance(built, tuple) or len(built) != 2 or not isinstance(built[0], nn.Module):
        raise UserError(
            f"--model {spec} must return (model, example_inputs) with an nn.Module "
            f"first; it returned {type(built).__name__}"
        )
    model, inputs = built
    if isinstance(inputs, torch.Tensor):
        inputs = (inputs,)
    if not isinstance(inputs, (tuple, list)) or not all(
        isinstance(t, torch.Tensor) for t in inputs
    ):
        shown = (
            type(inputs).__name__
            if not isinstance(inputs, (tuple, list))
            else "a "
            + type(inputs).__name__
            + " of "
            + ", ".join(sorted({type(t).__name__ for t in inputs}))
        )
        raise UserError(
            f"--model {spec} must return example_inputs as a tensor or a tuple of "
            f"tensors; it returned {shown}"
        )
    return model, tuple(inputs)


@contextlib.contextmanager
def user_model_errors(spec: str) -> Iterator[None]:
    """For ``--model package.module:function``: an exception raised in the user's code, or by
    torch on the user's model (a shape mismatch, a backend that cannot trace it), and a
    ``sys.exit`` called from it, become one line naming the function and where it failed. An
    exception raised in this package's own code stays a traceback (a bug here)."""
    if ":" not in spec:
        yield
        return
    try:
        yield
    except UserError:
        raise
    except SystemExit as stop:
        raise UserError(
            f"--model {spec} called sys.exit({stop.code!r}){_where(stop, spec)}; "
            "nothing was written"
        ) from None
    except Exception as error:
        if _raised_here(error):
            raise
        message = next((line.strip() for line in str(error).splitlines() if line.strip()), "")
        if len(message) > 300:
            message = message[:297] + "..."
        raise UserError(
            f"--model {spec} failed: {type(error).__name__}"
            f"{': ' + message if message else ''}{_where(error, spec)}"
        ) from None


def _raised_here(error: BaseException) -> bool:
    frames = traceback.extract_tb(error.__traceback__)
    package = str(Path(__file__).resolve().parent)
    return bool(frames) and str(Path(frames[-1].filename).resolve()).startswith(package + "/")


def _where(error: BaseException, spec: str) -> str:
    """ " (at file.py:LINE in function)" for the innermost frame in the user's module."""
    module = sys.modules.get(spec.partition(":")[0])
    source = getattr(module, "__file__", None)
    if not source:
        return ""
    source = str(Path(source).resolve())
    frames = [
        f
        for f in traceback.extract_tb(error.__traceback__)
        if str(Path(f.filename).resolve()) == source
    ]
    if not frames:
        return ""
    return f" (at {Path(source).name}:{frames[-1].lineno} in {frames[-1].name})"


def build(config: RunConfig, device: torch.device | str | None = None, load: bool = True) -> Built:
    """The model in eval mode with seeded random weights (``--weights`` loaded unless ``load``
    is False), and its example inputs on the CPU.

    A built-in model is made on ``device`` (default: the CPU): its weights are allocated and
    initialised there, by that device's random generator (on a GPU much faster than the host's).
    The same seed on the same device gives the same weights; the weights differ between devices.
    A package.module:function model is made where its function makes it."""
    torch.manual_seed(config.seed)  # every device's generator
    if ":" in config.model:
        model, inputs = _custom(config.model, config)
    elif config.model in MODELS:
        with torch.device(device) if device is not None else contextlib.nullcontext():
            model, inputs = MODELS[config.model](config)
    else:
        raise UserError(
            f"unknown model {config.model!r}; choose one of: "
            f"{', '.join(MODELS)}, or package.module:function"
        )
    if load and config.weights is not None:
        load_weights(model, config.weights)
    return model.eval(), inputs


def is_builtin(config: RunConfig) -> bool:
    """A model this package defines (its code is known), not a package.module:function."""
    return config.model in MODELS


def build_facts(config: RunConfig, inputs: tuple) -> dict:
    """What decides a built-in model's architecture and inputs, for cache keys: the model, the
    code that builds the models (this file and resnet.py), the input shapes and dtypes, the
    libraries' versions."""
    from profiler.collect import metadata

    versions = metadata.package_versions()
    code = b"".join(
        Path(__file__).with_name(name).read_bytes() for name in ("models.py", "resnet.py")
    )
    return {
        "model": config.model,
        "workload": config.workload,
        "model_code": hashlib.sha256(code).hexdigest()[:16],
        "inputs": [[list(t.shape), str(t.dtype).replace("torch.", "")] for t in inputs],
        "versions": {name: versions.get(name) for name in ("torch", "torchvision", "transformers")},
    }


def load_weights(model: nn.Module, path: Path) -> None:
    if not path.is_file():
        raise UserError(f"--weights {path}: no such file")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:
        raise UserError(
            f"--weights {path} is not a loadable state dict ({type(error).__name__}: "
            f"{str(error).splitlines()[0] if str(error) else ''})"
        ) from None
    if not isinstance(state, Mapping) or not all(
        isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in state.items()
    ):
        raise UserError(
            f"--weights {path} is not a state dict (a mapping of string names to tensors)"
        )
    try:
        result = model.load_state_dict(state, strict=False)
    except RuntimeError as error:  # shape mismatches raise even when strict=False
        first = str(error).strip().splitlines()[-1].strip()
        raise UserError(f"--weights {path} does not fit the model: {first}") from None
    problems = [f"missing {k}" for k in result.missing_keys] + [
        f"unexpected {k}" for k in result.unexpected_keys
    ]
    if problems:
        more = len(problems) - 3
        shown = ", ".join(problems[:3]) + (f" and {more} more" if more > 0 else "")
        raise UserError(f"--weights {path} does not fit the model: {shown}")


def is_conv_net(model: nn.Module) -> bool:
    return any(isinstance(m, nn.Conv2d) for m in model.modules())
