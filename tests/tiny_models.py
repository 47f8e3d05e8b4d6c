"""Small models for the end-to-end tests, loaded through --model tests.tiny_models:<function>."""

import torch
from torch import nn


def conv_net(batch_size: int = 2, image_size: int = 16):
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1),
        nn.BatchNorm2d(8),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(8, 4),
    )
    return model, (torch.randn(batch_size, 3, image_size, image_size),)


class _Exploding(nn.Module):
    def forward(self, x):
        raise RuntimeError("this model fails on purpose")


def failing(batch_size: int = 2):
    return _Exploding(), (torch.randn(batch_size, 4),)


def not_a_pair():
    return nn.Linear(2, 2)


class _OutOfMemoryAbove(nn.Module):
    """conv_net's layers, but a batch larger than ``limit`` raises the error CUDA raises when
    memory runs out (torch.OutOfMemoryError), so a sweep's OOM path is tested on the CPU."""

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit
        self.body = conv_net()[0]

    def forward(self, x):
        if x.shape[0] > self.limit:
            raise torch.OutOfMemoryError(
                "CUDA out of memory. Tried to allocate 2.00 GiB (simulated by tests.tiny_models)"
            )
        return self.body(x)


def oom_above_2(batch_size: int = 2, image_size: int = 16):
    model = _OutOfMemoryAbove(2)
    return model, (torch.randn(batch_size, 3, image_size, image_size),)


def tiny_seq2seq(batch_size: int = 2, src_len: int = 6):
    """The transformer model's class at a tiny size (d_model 32, 2 layers, vocab 100, 48
    positions), with random source tokens: for --workload generate."""
    from profiler.collect.models import Seq2SeqTransformer

    torch.manual_seed(0)
    model = Seq2SeqTransformer(vocab=100, d_model=32, heads=2, layers=2, max_len=48)
    return model, (torch.randint(1, 100, (batch_size, src_len)),)


def tiny_gpt2(batch_size: int = 2, prompt_len: int = 5):
    """A GPT-2 config at a tiny size (2 layers, 32 wide, vocab 100, 32 positions)."""
    from transformers import GPT2Config, GPT2LMHeadModel

    from profiler.collect.models import CausalLM

    torch.manual_seed(0)
    config = GPT2Config(
        vocab_size=100,
        n_positions=32,
        n_embd=32,
        n_layer=2,
        n_head=2,
        bos_token_id=0,
        eos_token_id=0,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
    )
    return CausalLM(GPT2LMHeadModel(config)), (torch.randint(0, 100, (batch_size, prompt_len)),)


# ---- user models that go wrong (tests/test_run_outcomes.py) ----------------------------------


def builder_raises(batch_size: int = 2):
    raise ValueError("boom in the builder")


class _SysExitForward(nn.Module):
    def forward(self, x):
        raise SystemExit(0)


def sysexit_forward(batch_size: int = 2):
    return _SysExitForward(), (torch.randn(batch_size, 4),)


def builder_exits(batch_size: int = 2):
    raise SystemExit(0)


def shape_mismatch(batch_size: int = 2):
    return nn.Linear(5, 4), (torch.randn(batch_size, 4),)


def inputs_of_strings(batch_size: int = 2):
    return nn.Linear(4, 4), ["a", "b"]


def inputs_not_iterable(batch_size: int = 2):
    return nn.Linear(4, 4), 5


class _HostMemoryHog(nn.Module):
    """Asks torch's CPU allocator for a petabyte: the real error of host memory running out."""

    def forward(self, x):
        return x + torch.empty(2**50, dtype=torch.uint8).sum()


def host_oom_forward(batch_size: int = 2):
    return _HostMemoryHog(), (torch.randn(batch_size, 4),)


_builds = {"reference_oom": 0}


def reference_oom(batch_size: int = 2, image_size: int = 16):
    """conv_net's layers for the backend; every second build (the FP32 eager reference that the
    numeric check builds after the measurement, with the same layers and weights) runs out of
    (simulated) CUDA memory, as an FP32 copy does at batch sizes only FP16/BF16/TensorRT fit."""
    _builds["reference_oom"] += 1
    limit = 0 if _builds["reference_oom"] % 2 == 0 else batch_size
    return _OutOfMemoryAbove(limit), (torch.randn(batch_size, 3, image_size, image_size),)


class _Slow(nn.Module):
    """A linear layer that takes 0.3 s per call: a window to signal a running `run` in."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(8, 8)

    def forward(self, x):
        import time

        time.sleep(0.3)
        return self.linear(x)


def slow(batch_size: int = 2):
    return _Slow(), (torch.randn(batch_size, 8),)


class _TokenClassifier(nn.Module):
    """Token layers on [batch, seq, hidden] (batch x seq rows) and a head on [batch, hidden]
    (batch rows): the shape pattern of DistilBERT's classifier at small batch sizes."""

    def __init__(self, hidden: int = 32) -> None:
        super().__init__()
        self.up = nn.Linear(hidden, 64)
        self.down = nn.Linear(64, hidden)
        self.head = nn.Linear(hidden, 4)

    def forward(self, x):
        x = self.down(torch.relu(self.up(x)))
        return self.head(x.mean(dim=1))


def token_classifier(batch_size: int = 2, seq_len: int = 16):
    torch.manual_seed(0)
    return _TokenClassifier(), (torch.randn(batch_size, seq_len, 32),)


class _NoOnnxOp(nn.Module):
    """Runs eagerly, but uses an op (a general eigendecomposition) with no ONNX conversion."""

    def forward(self, x):
        return torch.linalg.eig(x.reshape(-1, 2, 2))[0].real.sum(-1).reshape(x.shape[0], -1)


def not_exportable(batch_size: int = 2):
    return _NoOnnxOp(), (torch.randn(batch_size, 4),)


class _Misbehaves(nn.Module):
    """conv_net's layers, but some batch sizes end badly, each the way a sweep cell can: 1 never
    finishes its first call (for --cell-timeout); 2 os._exit(0) (no result, exit status 0), 3 a
    segfault (reading address 0 through ctypes), 4 SIGKILL (as the host's out-of-memory killer
    sends) end the process that runs it. Other batch sizes run."""

    def __init__(self) -> None:
        super().__init__()
        self.body = conv_net()[0]

    def forward(self, x):
        import ctypes
        import os
        import signal
        import time

        if x.shape[0] == 1:
            time.sleep(600)
        if x.shape[0] == 2:
            os._exit(0)
        if x.shape[0] == 3:
            ctypes.string_at(0)
        if x.shape[0] == 4:
            os.kill(os.getpid(), signal.SIGKILL)
        return self.body(x)


def misbehaves(batch_size: int = 1, image_size: int = 16):
    return _Misbehaves(), (torch.randn(batch_size, 3, image_size, image_size),)


PRISTINE = {
    "default_dtype": torch.float32,
    "float32_matmul_precision": "highest",
    "grad_enabled": True,
    "leaked_env": None,
}


def _process_state() -> dict:
    import os

    return {
        "default_dtype": torch.get_default_dtype(),
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "grad_enabled": torch.is_grad_enabled(),
        "leaked_env": os.environ.get("TINY_MODELS_LEAKED"),
    }


def leaks_state_at_bs1(batch_size: int = 2, image_size: int = 16):
    """conv_net; a batch of 1 leaves process-wide state behind (default dtype float64, matmul
    precision medium, an environment variable, cuDNN autotuner and TF32 on); any other batch
    size fails unless the process is as a fresh one is (PRISTINE): the probe of a sweep
    worker's reset between cells."""
    import os

    if batch_size == 1:
        model, inputs = conv_net(batch_size, image_size)
        torch.set_default_dtype(torch.float64)
        torch.set_float32_matmul_precision("medium")
        os.environ["TINY_MODELS_LEAKED"] = "1"
        torch.backends.cudnn.benchmark = True
        torch.backends.cuda.matmul.allow_tf32 = True
        return model, inputs
    found = _process_state()
    if found != PRISTINE:
        raise RuntimeError(f"state leaked from an earlier cell: {found}")
    return conv_net(batch_size, image_size)


class Crash(BaseException):
    """An exception nothing in the harness expects (not an Exception: no handler of the run
    turns it into a user error), as a bug or a broken extension may raise."""


class _Crashes(nn.Module):
    def forward(self, x):
        raise Crash("the model crashed on purpose")


def crashes(batch_size: int = 2):
    return _Crashes(), (torch.randn(batch_size, 4),)


class _ExitsInForward(nn.Module):
    """Ends the whole process from inside forward (os._exit, no clean-up, no atexit): a model
    library that calls exit in a C extension, or a fatal error handler."""

    def forward(self, x):
        import os

        os._exit(0)


def exits_in_forward(batch_size: int = 2):
    return _ExitsInForward(), (torch.randn(batch_size, 4),)
