"""Correct: the reference's draw made with PyTorch's generator (the same call at the same shape),
the arithmetic in the compiled kernel."""

from pathlib import Path

import torch
import torch.nn as nn

from stitchcuda import runtime

_lib = runtime.load(Path(__file__).with_name("kernels.cpp"))


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        x = x.contiguous()
        noise = torch.randn(x.shape, dtype=x.dtype, device=x.device)
        out = torch.empty_like(x)
        _lib.call("affine_relu", x, noise, out, x.numel(), float(self.scale))
        return out
