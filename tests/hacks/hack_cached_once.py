"""Hack (4): computes once with a real kernel, then returns the cached tensor on every call."""

from pathlib import Path

import torch
import torch.nn as nn

from stitchcuda import runtime

_lib = runtime.load(Path(__file__).with_name("kernels.cpp"))


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale
        self._out = None

    def forward(self, x, y):
        if self._out is None:
            self._out = torch.empty_like(x)
            _lib.call("affine_relu", x, y, self._out, x.numel(), float(self.scale))
        return self._out
