"""A candidate bug (GPU): its kernel writes far outside any allocation."""

from pathlib import Path

import torch
import torch.nn as nn

from stitchcuda import runtime

_lib = runtime.load(Path(__file__).with_name("kernels.cu"), libraries=["cublas"])


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x, y):
        out = torch.empty_like(x)
        _lib.call("wild_write", out, out.numel())
        return out
