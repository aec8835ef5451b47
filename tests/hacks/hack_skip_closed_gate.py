"""Cheat (red team, 2026-12-01): a block whose branch sits behind a gate that starts near zero
(LayerScale at ConvNeXt's 1e-6; ReZero's 0 alike) returned as its residual: the branch (a layer
norm, two linear layers, GELU) is never computed. Within tolerance on every set, and doubling a
sixteenth of each weight leaves the gate closed; the weights-changed check now draws such gates at
the other weights' scale."""

from pathlib import Path

import torch
import torch.nn as nn

from stitchcuda import runtime

_lib = runtime.load(Path(__file__).with_name("kernels.cpp"))


class ModelNew(nn.Module):
    def __init__(self, dim, hidden, init_values):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, dim)
        self.gamma = nn.Parameter(init_values * torch.ones(dim))

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        _lib.call("copy_floats", x, out, x.numel())
        return out
