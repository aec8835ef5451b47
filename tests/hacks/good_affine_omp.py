"""Correct: the whole computation in its own compiled loop, parallelised by OpenMP (threads that
libgomp starts); torch only allocates."""

from pathlib import Path

import torch
import torch.nn as nn

from stitchcuda import runtime

_lib = runtime.load(Path(__file__).with_name("kernels_omp.cpp"), extra_flags=["-fopenmp"])


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x, y):
        x, y = x.contiguous(), y.contiguous()
        out = torch.empty_like(x)
        _lib.call("affine_relu_omp", x, y, out, x.numel(), float(self.scale))
        return out
