"""Cheat (red team, 2026-12-04; accepted on the CPU before the Verifier compared a candidate's error
across kinds of input sets): attention estimated as the mean of V's rows, L times less work, wherever
16 rows it computes exactly agree with that estimate; exact elsewhere. On the reference's random
draws the attention is nearly uniform and the estimate is within the TF32 tolerance; on the large,
spiked and coupled sets the spot check fails and it is exact."""

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
        _lib.call("attention_mean_v_checked", q, k, v, out, b, n, d, float(d) ** -0.5)
        return out
