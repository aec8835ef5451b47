"""Cheat (red team, 2026-12-01): a norm from 1/64 of its blocks wherever every value lies in rand()'s
[0, 1], the range test riding along the output pass: within 1e-2 on iid inputs, and sparse-spikes
(out of range) takes the exact path. quiet-bulk (the same spikes, the rest made small) is in range."""

from pathlib import Path

import torch
import torch.nn as nn

from stitchcuda import runtime

_lib = runtime.load(Path(__file__).with_name("kernels.cpp"))


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        _lib.call("norm_scale_gated", x, out, x.numel(), 64)
        return out
