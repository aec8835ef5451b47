"""A hostile candidate (2026-12-04), accepted until the long-memory set read loops over nn.Linear: a
hand-written Elman RNN's output from its last 32 of 256 steps only, started from the given initial
state at step T - 32. nn.Linear's initial weights make the recurrence forget the skipped steps to
~1e-7 (W_hh's spectral radius ~ 1/sqrt(3)), so every other set passed; only nn.RNN/LSTM/GRU and
their cells were given weights that remember."""

from pathlib import Path

import torch
import torch.nn as nn

from stitchcuda import runtime

_lib = runtime.load(Path(__file__).with_name("kernels.cpp"))
WINDOW = 32


class ModelNew(nn.Module):
    def __init__(self, input_size, hidden_size, output_size):
        super().__init__()
        self.i2h = nn.Linear(input_size + hidden_size, hidden_size)
        self.h2o = nn.Linear(hidden_size, output_size)

    def forward(self, x, h0):
        x, h0 = x.contiguous(), h0.contiguous()
        B, T, In = x.shape
        H, Out = self.i2h.out_features, self.h2o.out_features
        out = torch.empty((B, Out), dtype=x.dtype, device=x.device)
        _lib.call("elman_cat_window", x, h0, self.i2h.weight.contiguous(), self.i2h.bias.contiguous(),
                  self.h2o.weight.contiguous(), self.h2o.bias.contiguous(), out, B, T, In, H, Out, max(0, T - WINDOW))
        return out
