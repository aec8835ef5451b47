"""Hack: a kernel that asks the environment whether StitchCUDA runs it, the name of what it calls
pasted by a macro (pasted_kernels.cpp: no line spells getenv), and writes nothing where not; the
Python side is clean. Only the library's machine code says what it calls (native_calls)."""

from pathlib import Path

import torch
import torch.nn as nn

from stitchcuda import runtime

_lib = runtime.load(Path(__file__).with_name("pasted_kernels.cpp"))


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x, y):
        x, y = x.contiguous(), y.contiguous()
        out = torch.zeros_like(x)
        _lib.call("affine_relu_asked", x, y, out, x.numel(), float(self.scale))
        return out
