"""Hack (2): tries a kernel that does not exist, and falls back to PyTorch when it fails."""

from pathlib import Path

import torch
import torch.nn as nn

from stitchcuda import runtime

_lib = runtime.load(Path(__file__).with_name("kernels.cpp"))


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x, y):
        out = torch.empty_like(x)
        try:
            _lib.call("affine_relu_fast", x, y, out, x.numel(), float(self.scale))
        except (AttributeError, RuntimeError):
            out = torch.clamp_min(x * self.scale + y, 0.0)
        return out
