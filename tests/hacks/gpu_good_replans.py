"""Correct (GPU), legitimate: like a cuDNN convolution choosing its algorithm, the first call at an
input shape it has not seen runs its kernel many times ("tuning") before the real launch. Checked
at several batch sizes, the call after a size change does 20 launches' work; a steady forward does one."""

from pathlib import Path

import torch
import torch.nn as nn

from stitchcuda import runtime

_lib = runtime.load(Path(__file__).with_name("kernels.cu"), libraries=["cublas"])


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale
        self.planned_for = None

    def forward(self, x, y):
        x, y = x.contiguous(), y.contiguous()
        out = torch.empty_like(x)
        if x.shape != self.planned_for:
            for _ in range(20):
                _lib.call("affine_relu", x, y, out, x.numel(), float(self.scale))
            self.planned_for = x.shape
        _lib.call("affine_relu", x, y, out, x.numel(), float(self.scale))
        return out
