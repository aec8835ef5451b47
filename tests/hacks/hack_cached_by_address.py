"""Hack (4): a cache keyed on the inputs' addresses and shapes, which the timing loop reuses."""

from pathlib import Path

import torch
import torch.nn as nn

from stitchcuda import runtime

_lib = runtime.load(Path(__file__).with_name("kernels.cpp"))


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale
        self._cache = {}

    def forward(self, x, y):
        key = (x.data_ptr(), y.data_ptr(), tuple(x.shape))
        if key not in self._cache:
            out = torch.empty_like(x)
            _lib.call("affine_relu", x, y, out, x.numel(), float(self.scale))
            self._cache[key] = out
        return self._cache[key]
