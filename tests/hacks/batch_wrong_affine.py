"""Wrong at other batch sizes: right at the traced batch (8 rows of 33), it computes only as many
elements as the traced batch has, whatever batch it is given; the rest of a larger output is never
written. Declared dynamic-batch by the test, so the Verifier checks it at other batch sizes."""

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
        _lib.call("affine_relu", x, y, out, min(x.numel(), 8 * 33), float(self.scale))
        return out
