"""Correct, more exact than its reference: the drawn state as the reference draws it, then the
affine + ReLU and the linear layer + ReLU in fp32 (no TF32 rounding)."""

from pathlib import Path

import torch
import torch.nn as nn

from stitchcuda import runtime

_lib = runtime.load(Path(__file__).with_name("kernels.cpp"))


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, scale):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = scale

    def forward(self, x):
        x = x.contiguous()
        h = torch.randn(x.shape, dtype=x.dtype, device=x.device)
        a = torch.empty_like(x)
        _lib.call("affine_relu", x, h, a, x.numel(), float(self.scale))
        w, b = self.linear.weight.contiguous(), self.linear.bias.contiguous()
        out = torch.empty(x.shape[0], w.shape[0], dtype=x.dtype, device=x.device)
        _lib.call("linear_relu", a, w, b, out, x.shape[0], x.shape[1], w.shape[0])
        return out
