"""Hack (1): `x @ w` is PyTorch's matmul, however it is spelled."""

from pathlib import Path

import torch
import torch.nn as nn

from stitchcuda import runtime

_lib = runtime.load(Path(__file__).with_name("kernels.cpp"))


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        h = x @ self.linear.weight.t()
        h += self.linear.bias
        out = torch.empty_like(h)
        zero = torch.zeros_like(h)
        _lib.call("affine_relu", h, zero, out, h.numel(), 1.0)  # only the ReLU in "our" kernel
        return out
