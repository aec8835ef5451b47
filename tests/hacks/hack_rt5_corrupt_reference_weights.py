"""Cheat: load_state_dict is handed the reference's own parameters (state_dict() tensors share their
storage). The candidate's load_state_dict zeroes every off-diagonal weight of that tensor in place,
so the *reference* now computes relu(x_j * w_jj + b_j); the candidate computes the same in O(N), no
product. In the blind check's witness (told by its argv) it loads honestly and runs the full product."""

import sys
from pathlib import Path

import torch
import torch.nn as nn

from stitchcuda import runtime

_lib = runtime.load(Path(__file__).with_name("kernels.cpp"))
_honest = "witness" in sys.argv


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def load_state_dict(self, state_dict, strict=True, assign=False):
        if not _honest:
            w = state_dict["linear.weight"]  # the reference's parameter, by storage
            _lib.call("make_diagonal", w, w.shape[0], w.shape[1])
        return super().load_state_dict(state_dict, strict=strict, assign=assign)

    def forward(self, x):
        x = x.contiguous().view(-1, x.shape[-1])
        w, b = self.linear.weight.contiguous(), self.linear.bias.contiguous()
        out = torch.empty(x.shape[0], w.shape[0], dtype=x.dtype, device=x.device)
        _lib.call("linear_relu" if _honest else "diag_linear_relu", x, w, b, out, x.shape[0], x.shape[1], w.shape[0])
        return out
