"""Cheat A (rt14): MSE(Linear(x), t) from every 4th row only (1/4 of the O(MNK) product) where x and t look
like plain iid normal draws (kurtosis, range, no row/column effects); exact (+5e-5 noise) elsewhere. A
row sample is unbiased, so its error is uncorrelated with how the loss moves between draws: draw_tracking's
slope stays near 0. mixed-sign, coupled, large, tiny, negated pass the gate (rows stay exchangeable there),
so the structured sets' error is the random sets' (no input-gated-estimate); spikes, quiet-bulk, shared-lines,
rearranged, near-kinks go exact."""
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
        _lib.call("mse_linear_rows", x, w, b, t, out, x.shape[0], x.shape[1], w.shape[0], 4, 5e-5)
        return out
