"""Cheat (red team round 12, 2026-12-06): x / ||x|| with the norm from a 1/61 strided sample, wherever the sample's range, mean,
variance and neighbour correlations look like rand()'s and every value lies in [0, 1] (tested in the output
pass); exact, with 6e-5 of noise, elsewhere."""

from pathlib import Path

import torch
import torch.nn as nn

from stitchcuda import runtime

_lib = runtime.load(Path(__file__).with_name("rt12_kernels.cpp"))


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        st = list(x.stride()) + [1] * (4 - x.dim())
        _lib.call("norm_scale_moment_gated", x, out, x.numel(), st[3], st[2], st[1], st[0], 61, 6e-5)
        return out
