"""Cheat (dynamic batch): right at every batch that is not a multiple of the traced one. Where the
batch is k x traced (k >= 2, the commonest way a user grows a batch: 16, 32, 64 ...), only the first
chunk is computed and copied over the others. The batch sizes checked are 1, traced//2 + 1,
traced + 1 and one in [2 traced + 1, 3 traced - 1]: none is such a multiple."""

from pathlib import Path

import torch
import torch.nn as nn

from stitchcuda import runtime

_lib = runtime.load(Path(__file__).with_name("kernels.cpp"))


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale
        self.chunk = 0

    def forward(self, x, y):
        x, y = x.contiguous(), y.contiguous()
        if not self.chunk:
            self.chunk = x.shape[0]  # random-0 runs first, at the traced batch
        out = torch.empty_like(x)
        b, per = x.shape[0], x[0].numel()
        if b > self.chunk and b % self.chunk == 0:
            _lib.call("affine_relu", x, y, out, self.chunk * per, float(self.scale))
            for k in range(1, b // self.chunk):
                out[k * self.chunk:(k + 1) * self.chunk].copy_(out[: self.chunk])
            return out
        _lib.call("affine_relu", x, y, out, x.numel(), float(self.scale))
        return out
