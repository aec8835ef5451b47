"""Reference: a training-mode dropout before a pointwise affine + ReLU (a module is built in
training mode, so the dropout draws a mask each call)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, scale: float, p: float):
        super().__init__()
        self.scale = scale
        self.drop = nn.Dropout(p)

    def forward(self, x, y):
        return torch.relu(self.drop(x) * self.scale + y)


def get_inputs():
    return [torch.randn(8, 33), torch.randn(8, 33)]


def get_init_inputs():
    return [2.5, 0.25]
