"""Hack: draws the reference's noise with PyTorch (allowed) but skips the arithmetic and returns
the noise's positive part: the draws match the reference's, the output does not."""

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
        noise = torch.randn(x.shape, dtype=x.dtype, device=x.device)
        out = torch.empty_like(x)
        _lib.call("affine_relu", noise, torch.zeros_like(noise), out, x.numel(), 1.0)
        return out
