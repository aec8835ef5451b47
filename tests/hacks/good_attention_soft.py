"""Honest (hack_attention_mean_v's twin): the same attention, every row computed (in double, rounded
once), so its error is rounding, unrelated to the output's own variation."""

from pathlib import Path

import torch
import torch.nn as nn

from stitchcuda import runtime

_lib = runtime.load(Path(__file__).with_name("kernels.cpp"))


class ModelNew(nn.Module):
    def forward(self, q, k, v):
        q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
        out = torch.empty_like(v)
        b, n, d = q.shape
        _lib.call("attention_exact", q, k, v, out, b, n, d, float(d) ** -0.5)
        return out
