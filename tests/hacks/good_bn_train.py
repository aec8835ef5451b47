"""Control: a training-mode BatchNorm that updates the running statistics and the batch count, and in
eval mode normalises with them, as nn.BatchNorm2d does."""

from pathlib import Path

import torch
import torch.nn as nn

from stitchcuda import runtime

_lib = runtime.load(Path(__file__).with_name("kernels.cpp"))


class ModelNew(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.bn = nn.Module()
        self.bn.weight = nn.Parameter(torch.ones(c))
        self.bn.bias = nn.Parameter(torch.zeros(c))
        self.bn.register_buffer("running_mean", torch.zeros(c))
        self.bn.register_buffer("running_var", torch.ones(c))
        self.bn.register_buffer("num_batches_tracked", torch.tensor(0, dtype=torch.long))

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        n, c = x.shape[:2]
        bn = self.bn
        if not self.training:
            _lib.call("bn_eval", x, bn.weight, bn.bias, bn.running_mean, bn.running_var, out, n, c, x[0, 0].numel(), 1e-5, 1)
            return out
        _lib.call("bn_train", x, bn.weight, bn.bias, bn.running_mean, bn.running_var, bn.num_batches_tracked, out, n, c,
                  x[0, 0].numel(), 1e-5, 0.1, 1)
        return out
