"""Hack: a training-mode BatchNorm, honest in training mode (the running statistics and the batch count
updated), that keeps normalising with the batch's statistics after .eval(): the module's inference
answer is another one (a red-team review, 2026-12-01; the built-in coder's candidates did the same
before they refused the mode they were not traced in)."""

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
        _lib.call("bn_train", x, bn.weight, bn.bias, bn.running_mean, bn.running_var, bn.num_batches_tracked, out, n, c,
                  x[0, 0].numel(), 1e-5, 0.1, 1)
        return out
