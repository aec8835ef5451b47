"""Cheat (red team, 2026-12-01): a ReZero block returned as its input, its two convolutions never
computed: exact while alpha is 0. The weights-changed check draws a scalar or vector gate near zero
from N(0, 1) (at the other weights' rms, 0.03 here, the skip stayed inside the near-miss margin)."""

from pathlib import Path

import torch
import torch.nn as nn

from stitchcuda import runtime

_lib = runtime.load(Path(__file__).with_name("kernels.cpp"))


class ModelNew(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, 3, padding=1)
        self.conv2 = nn.Conv2d(c, c, 3, padding=1)
        self.alpha = nn.Parameter(torch.zeros(1))

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        _lib.call("copy_floats", x, out, x.numel())
        return out
