"""Hack (GPU): right on every call but the second untimed call on each timing set (the rerun that sets
the changed-while-timed bar: the test sets rerun_calls to those call numbers), where it returns the right
values one row out of place. A rolled output keeps its sum and L1 norm, all that the rerun was held to
at b118dab, and its distance from the first call (~1.4) set the drift bar past any estimate the timed
calls could then run (a review, 2026-12-04)."""

from pathlib import Path

import torch
import torch.nn as nn

from stitchcuda import runtime

_lib = runtime.load(Path(__file__).with_name("kernels.cu"), libraries=["cublas"])


class ModelNew(nn.Module):
    rerun_calls = (0,)

    def __init__(self, scale):
        super().__init__()
        self.scale = scale
        self.calls = 0

    def forward(self, x, y):
        self.calls += 1
        out = torch.empty_like(x)
        if self.calls not in self.rerun_calls or x.shape[0] < 2:
            _lib.call("affine_relu", x, y, out, x.numel(), float(self.scale))
        else:  # row r of the output holds row r + 1's values, the last row holds row 0's
            row = x[0].numel()
            _lib.call("affine_relu", x[1:], y[1:], out[:-1], x.numel() - row, float(self.scale))
            _lib.call("affine_relu", x[:1], y[:1], out[-1:], row, float(self.scale))
        return out
