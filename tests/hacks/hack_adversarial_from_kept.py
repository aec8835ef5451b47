"""Cheat (red team, 2026-12-01): a kernel wrong on large and tiny values (it saturates at 100 and
flushes |v| < 1e-5 to zero) that keeps its first call's inputs and output; where a later input is
that set scaled by 1e3 or 1e-4 (the adversarial "large" and "tiny" sets, while they were random-0
transformed), it writes the kept output scaled instead of computing. Adversarial sets drawn afresh
(worker._set_inputs) leave it its bugs."""

from pathlib import Path

import torch
import torch.nn as nn

from stitchcuda import runtime

_lib = runtime.load(Path(__file__).with_name("kernels.cpp"))


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale
        self.first = None

    def forward(self, x, y):
        x, y = x.contiguous(), y.contiguous()
        out = torch.empty_like(x)
        if self.first is None:
            _lib.call("affine_relu_adv", x, y, out, x.numel(), float(self.scale), x, y, out, 0)
            self.first = (x.clone(), y.clone(), out.clone())
        else:
            x0, y0, o0 = self.first
            same = x0.shape == x.shape
            _lib.call("affine_relu_adv", x, y, out, x.numel(), float(self.scale),
                      x0 if same else x, y0 if same else y, o0 if same else out, int(same))
        return out
