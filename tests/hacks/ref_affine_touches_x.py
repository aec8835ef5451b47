"""Reference: ref_affine, with an in-place op on its input that leaves every bit as it was (x * 1):
the version counter moves, the values do not, so a candidate may still not change x."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, x, y):
        x.mul_(1.0)
        return torch.relu(x * self.scale + y)


def get_inputs():
    return [torch.randn(8, 33), torch.randn(8, 33)]


def get_init_inputs():
    return [2.5]
