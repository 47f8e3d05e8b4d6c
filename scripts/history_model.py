"""The model of scripts/device_history.sh's "commits": torchvision's ResNet50 (random weights)
with EXTRA_OPS extra elementwise multiplications by 1 on layer1's output, each one read and one
write of that activation (batch x 256 x 56 x 56 at 224 px). The script copies this file into a
git repository of its own and, partway through its commits, changes EXTRA_OPS from 0 to the
script's OPS (4 by default) and commits that, as a change to a model's code would: a deliberate
slowdown of eager FP16 GPU time at batch 8 (OPS passes over 12.8 MB of FP16 beside ResNet50's
53 kernels a call; docs/gpu/h200/history measured 4 and 8). `run --model history_model:build`
imports it from PYTHONPATH."""

from __future__ import annotations

import torch
from torch import nn

#: extra elementwise multiplications on layer1's output (the script's change sets it)
EXTRA_OPS = 0


class WithExtraOps(nn.Module):
    """ResNet50's forward, with ``extra`` multiplications by 1 after layer1."""

    def __init__(self, net: nn.Module, extra: int) -> None:
        super().__init__()
        self.net, self.extra = net, extra

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n = self.net
        x = n.maxpool(n.relu(n.bn1(n.conv1(x))))
        x = n.layer1(x)
        for _ in range(self.extra):
            x = x * 1.0
        x = n.layer4(n.layer3(n.layer2(x)))
        return n.fc(torch.flatten(n.avgpool(x), 1))


def build(batch_size: int = 8, image_size: int = 224) -> tuple[nn.Module, torch.Tensor]:
    import torchvision

    model = WithExtraOps(torchvision.models.resnet50(weights=None), EXTRA_OPS).eval()
    return model, torch.randn(batch_size, 3, image_size, image_size)
