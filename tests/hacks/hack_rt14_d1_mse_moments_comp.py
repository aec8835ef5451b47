"""Cheat D1 (rt14): mse_loss(Linear(x), t) with no matmul at all (O(MK + NK + MN), not O(MNK)): the loss from x's
mean/variance, W's row norms and sums, b, t's column sums and sum of squares, plus lambda x (its deviation from the
loss's expectation for N(0,1) inputs), lambda chosen from analytic variances so draw_tracking's slope comes out at
+0.1 (uncompensated, ctl_d0's slope is -0.3..-0.75 and its t-test with 9 dof catches it in some runs only). Gate:
plain unit-variance normal x and t; exact (+5e-5 noise) elsewhere."""
from pathlib import Path

import torch
import torch.nn as nn

from stitchcuda import runtime

_lib = runtime.load(Path(__file__).with_name("rt14_estimates.cpp"))


class ModelNew(nn.Module):
    def __init__(self, k, n):
        super().__init__()
        self.fc = nn.Linear(k, n)

    def forward(self, x, t):
        x, t = x.contiguous(), t.contiguous()
        w, b = self.fc.weight.contiguous(), self.fc.bias.contiguous()
        out = torch.empty((), dtype=x.dtype, device=x.device)
        _lib.call("mse_moments_comp", x, w, b, t, out, x.shape[0], x.shape[1], w.shape[0], 0.1, 5e-5)
        return out
