"""The built-in ResNets are torchvision's, module for module, without importing torchvision: the
same names and shapes (its state dicts load), the same weights under a seed, the same operators in
the same order and the same outputs."""

import subprocess
import sys

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from profiler.collect import resnet
from tests.conftest import ROOT

torchvision = pytest.importorskip("torchvision")


class _Ops(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.names: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.names.append(str(func))
        return func(*args, **(kwargs or {}))


def _ops(model, x) -> list[str]:
    with torch.no_grad(), _Ops() as ops:
        model(x)
    return ops.names


@pytest.mark.parametrize("arch", ["resnet18", "resnet50"])
def test_a_seed_gives_torchvisions_model_its_weights_operators_and_outputs(arch):
    torch.manual_seed(7)
    theirs = getattr(torchvision.models, arch)(weights=None).eval()
    torch.manual_seed(7)
    ours = getattr(resnet, arch)().eval()
    assert [(n, type(m).__name__) for n, m in theirs.named_modules()] == [
        (n, type(m).__name__) for n, m in ours.named_modules()
    ]
    mine, reference = ours.state_dict(), theirs.state_dict()
    assert list(mine) == list(reference)
    assert all(torch.equal(mine[name], reference[name]) for name in reference)
    x = torch.randn(2, 3, 64, 64)
    assert _ops(ours, x) == _ops(theirs, x)
    with torch.no_grad():
        assert torch.equal(ours(x), theirs(x))


def test_a_resnet_run_does_not_import_torchvision():
    code = (
        "import sys; from profiler.collect import models; from profiler.runs.config import "
        "RunConfig; models.build(RunConfig(model='resnet18', batch_size=1, image_size=32)); "
        "print('torchvision' in sys.modules, 'torch._dynamo' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    assert out.split() == ["False", "False"]


def test_a_run_imports_no_pandas_and_no_torch_dynamo():
    # what `profile.py run` of an eager model imports before and after its windows
    code = (
        "import sys; import profiler.cli.app, profiler.commands.run, "
        "profiler.collect.harness, profiler.report.run_view; "
        "print('pandas' in sys.modules, 'torch._dynamo' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    assert out.split() == ["False", "False"]
