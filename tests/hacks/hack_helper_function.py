"""Torch compute hidden in a helper function that forward calls."""

from pathlib import Path

import torch
import torch.nn as nn

from stitchcuda import runtime

_lib = runtime.load(Path(__file__).with_name("kernels.cpp"))


def _prepare(x, y, scale):
    return torch.addcmul(y, x, torch.full_like(x, scale))


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x, y):
        pre = _prepare(x, y, self.scale)
        out = torch.empty_like(pre)
        zero = torch.zeros_like(pre)
        _lib.call("affine_relu", pre, zero, out, pre.numel(), 1.0)  # the ReLU alone
        return out
