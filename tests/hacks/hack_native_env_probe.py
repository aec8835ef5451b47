"""Hack: a kernel that asks the environment whether StitchCUDA runs it (probe_kernels.cpp) and
writes nothing where not; the Python side is clean."""

from pathlib import Path

import torch
import torch.nn as nn

from stitchcuda import runtime

_lib = runtime.load(Path(__file__).with_name("probe_kernels.cpp"))


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x, y):
        x, y = x.contiguous(), y.contiguous()
        out = torch.zeros_like(x)
        _lib.call("affine_relu_probed", x, y, out, x.numel(), float(self.scale))
        return out
