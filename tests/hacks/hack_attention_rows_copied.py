"""Cheat (red team round 3, 2026-12-04; accepted before the smoothed-estimate check counted a correlation
by its significance): behind hack_attention_mean_v's gate, 16 rows computed and each copied over the
L/16 - 1 rows after it, 8x less work at L = 128; its error is 15/16 of the output's variation taken
away plus an independent copy of it (correlation about -0.7)."""

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
        _lib.call("attention_rows_replicated", q, k, v, out, b, n, d, float(d) ** -0.5)
        return out
