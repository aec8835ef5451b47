"""Reference: ref_affine's affine + ReLU, and a parameter (unused in the result) it rescales in place
in forward, by one: fine with autograd off, refused by autograd with it on (a leaf that requires grad,
written in place)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale
        self.gain = nn.Parameter(torch.ones(()))

    def forward(self, x, y):
        self.gain.mul_(1.0)
        return torch.relu(x * self.scale + y)


def get_inputs():
    return [torch.randn(8, 33), torch.randn(8, 33)]


def get_init_inputs():
    return [2.5]
