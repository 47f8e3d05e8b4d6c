"""Small models for the end-to-end tests, loaded through --model tests.tiny_models:<function>."""

import torch
from torch import nn


def conv_net(batch_size: int = 2, image_size: int = 16):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 4))
    return model, (torch.randn(batch_size, 3, image_size, image_size),)


class _Exploding(nn.Module):
    def forward(self, x):
        raise RuntimeError("this model fails on purpose")


def failing(batch_size: int = 2):
    return _Exploding(), (torch.randn(batch_size, 4),)


def not_a_pair():
    return nn.Linear(2, 2)
