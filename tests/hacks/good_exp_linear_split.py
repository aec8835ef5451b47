"""Correct: exp(x W^T - 20) as exp(x W^T) * exp(-20), in its own kernel. Where the reference's outputs
are finite it agrees to float32's rounding; past float32's range its infinities fall elsewhere
(exp(x W^T) overflows before the product would)."""

from pathlib import Path

import torch
import torch.nn as nn

from stitchcuda import runtime

_lib = runtime.load(Path(__file__).with_name("kernels.cpp"))


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features, bias=False)

    def forward(self, x):
        x = x.contiguous().view(-1, x.shape[-1])
        w = self.linear.weight.contiguous()
        out = torch.empty(x.shape[0], w.shape[0], dtype=x.dtype, device=x.device)
        _lib.call("exp_linear_split", x, w, out, x.shape[0], x.shape[1], w.shape[0], -20.0)
        return out
