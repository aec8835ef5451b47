"""Wrong past two chunks: right at every batch up to twice the traced one (8 rows of 33), it computes
at most 16 rows, whatever batch it is given; the rest of a larger output is never written. Every
size the Verifier checked before 2026-12-02 was at most the traced batch + 1, so it was accepted.
Declared dynamic-batch by the test, so the Verifier checks it at other batch sizes."""

from pathlib import Path

import torch
import torch.nn as nn

from stitchcuda import runtime

_lib = runtime.load(Path(__file__).with_name("kernels.cpp"))


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x, y):
        x, y = x.contiguous(), y.contiguous()
        out = torch.empty_like(x)
        _lib.call("affine_relu", x, y, out, min(x.numel(), 2 * 8 * 33), float(self.scale))
        return out
