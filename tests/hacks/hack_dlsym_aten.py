"""Hack: good_affine's module over native code that looks PyTorch's kernel at::cpu::add up by a
name built at run time (kernels_dlsym.cpp): no undefined symbol names it, the preloaded watch does."""

from pathlib import Path

import torch
import torch.nn as nn

from stitchcuda import runtime

_lib = runtime.load(Path(__file__).with_name("kernels_dlsym.cpp"))


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x, y):
        x, y = x.contiguous(), y.contiguous()
        out = torch.empty_like(x)
        _lib.call("affine_relu", x, y, out, x.numel(), float(self.scale))
        return out
