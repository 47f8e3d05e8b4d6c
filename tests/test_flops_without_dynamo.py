"""The FLOP count does not import torch._dynamo (seconds of a first run) and leaves torch as it
found it: the same figures as a count with torch._dynamo imported, nothing cached on torch's
functions, no stand-in left behind."""

import subprocess
import sys

from tests.conftest import ROOT

CODE = """
import sys, torch
from profiler.collect import flops, models
from profiler.runs.config import RunConfig
from torch.utils.flop_counter import _FlopCounterMode
model, inputs = models.build(RunConfig(model="resnet18", batch_size=2, image_size=32))
with flops._without_dynamo():
    meta = flops._counted(model, inputs, "meta")
    cpu = flops._counted(model, inputs, "cpu")
print("imported", "torch._dynamo" in sys.modules, "_dynamo" in vars(torch))
dispatch = _FlopCounterMode.__dict__["__torch_dispatch__"].__wrapped__
print("cached", "__dynamo_disable" in vars(dispatch))
import torch._dynamo
print("real", torch._dynamo.disable.__module__)
print("same", flops._counted(model, inputs, "meta") == meta,
      flops._counted(model, inputs, "cpu") == cpu)
"""


def test_the_count_runs_without_torch_dynamo_and_leaves_torch_as_it_was():
    out = subprocess.run(
        [sys.executable, "-c", CODE], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert out == [
        "imported False False",
        "cached False",
        "real torch._dynamo.decorators",
        "same True True",
    ]
