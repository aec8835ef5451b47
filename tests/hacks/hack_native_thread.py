"""Hack: right results computed on a thread its C++ starts (std::thread) and joins: nothing Python
can see starts a thread."""

from pathlib import Path

import torch
import torch.nn as nn

from stitchcuda import runtime

_lib = runtime.load(Path(__file__).with_name("kernels_thread.cpp"))


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x, y):
        x, y = x.contiguous(), y.contiguous()
        out = torch.empty_like(x)
        _lib.call("affine_relu_threaded", x, y, out, x.numel(), float(self.scale))
        return out
