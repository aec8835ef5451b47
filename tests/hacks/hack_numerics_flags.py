"""Hack: computes correctly, but flips PyTorch's TF32 switches on import, so the reference (and the
fp64 referee's measure of the reference's own error) would run at lower precision."""

from pathlib import Path

import torch
import torch.nn as nn

from stitchcuda import runtime

torch.backends.cuda.matmul.allow_tf32 = True
torch.backends.cudnn.allow_tf32 = False
_lib = runtime.load(Path(__file__).with_name("kernels.cpp"))


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x, y):
        x, y = x.contiguous(), y.contiguous()
        out = torch.empty_like(x)
        _lib.call("affine_relu", x, y, out, x.numel(), float(self.scale))
        return out
