"""Reference: LayerNorm of x + 1 with x around 1e-6. In fp32, x + 1 keeps only a few bits of x, so
this reference is itself ~3% off the exact result: the case the fp64 referee exists for."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.norm = nn.LayerNorm(features, elementwise_affine=False)

    def forward(self, x):
        return self.norm(x + 1.0)


def get_inputs():
    return [torch.randn(16, 64) * 1e-6]


def get_init_inputs():
    return [64]
