"""Correct: ref_rnn_params run over every step in a C loop, the honest twin of hack_rnn_params_truncated."""

from pathlib import Path

import torch
import torch.nn as nn

from stitchcuda import runtime

_lib = runtime.load(Path(__file__).with_name("kernels.cpp"))


class ModelNew(nn.Module):
    def __init__(self, input_size, hidden_size, output_size):
        super().__init__()
        self.W_xh = nn.Parameter(torch.randn(input_size, hidden_size) / input_size**0.5)
        self.W_hh = nn.Parameter(torch.randn(hidden_size, hidden_size) / (3 * hidden_size) ** 0.5)
        self.b = nn.Parameter(torch.zeros(hidden_size))
        self.W_hy = nn.Parameter(torch.randn(hidden_size, output_size) / hidden_size**0.5)

    def forward(self, x, h0):
        x, h0 = x.contiguous(), h0.contiguous()
        B, T, In = x.shape
        H, Out = self.W_hh.shape[0], self.W_hy.shape[1]
        out = torch.empty((B, Out), dtype=x.dtype, device=x.device)
        _lib.call("elman_params_window", x, h0, self.W_xh.contiguous(), self.W_hh.contiguous(), self.b.contiguous(),
                  self.W_hy.contiguous(), out, B, T, In, H, Out, 0)
        return out
