"""A red-team candidate (2026-12-02), accepted until the long-memory check: the RNN's last hidden
state from the last 32 of 512 time steps only (94% of the recurrence skipped), each layer started from h = 0 at step T - 32. nn.RNN's initial weights,
U(-1/sqrt(H), 1/sqrt(H)), make the recurrence contract (spectral radius of W_hh ~ 1/sqrt(3), times
tanh' <= 1), so the state forgets the skipped steps to ~0.58^32 ~ 3e-8 whatever the inputs are: no
input set (scaled, spiked, lined, rearranged) changes that, and the weights-changed check
(a sixteenth doubled) keeps it contractive. A trained RNN with long memory would be far off, and is:
the long-memory check gives the recurrence weights that remember (worker._check_long_memory)."""

from pathlib import Path

import torch
import torch.nn as nn

from stitchcuda import runtime

_lib = runtime.load(Path(__file__).with_name("kernels.cpp"))
WINDOW = 32


class ModelNew(nn.Module):
    def __init__(self, input_size, hidden_size, num_layers):
        super().__init__()
        self.rnn = nn.RNN(input_size, hidden_size, num_layers, batch_first=True)

    def forward(self, x):
        x = x.contiguous()
        B, T, _ = x.shape
        H, L = self.rnn.hidden_size, self.rnn.num_layers
        t0 = max(0, T - WINDOW)
        hn = torch.empty((L, B, H), dtype=x.dtype, device=x.device)
        inp = x
        for layer in range(L):
            w_ih = getattr(self.rnn, f"weight_ih_l{layer}").contiguous()
            w_hh = getattr(self.rnn, f"weight_hh_l{layer}").contiguous()
            b_ih = getattr(self.rnn, f"bias_ih_l{layer}").contiguous()
            b_hh = getattr(self.rnn, f"bias_hh_l{layer}").contiguous()
            y = torch.empty((B, T, H), dtype=x.dtype, device=x.device)
            _lib.call("rnn_tanh_window", inp, w_ih, w_hh, b_ih, b_hh, y, hn[layer], B, T, inp.shape[2], H, t0)
            inp = y
        return hn
