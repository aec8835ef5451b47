"""Cheat (red team, 2026-12-04; accepted until the weights-changed set changed strided tensors too):
the generated weight tanh(W1 @ W2) built on the first call and kept for good, stale after any change
of the weights. W1 and W2 are held as transposed views ("column-major for the kernel"): their names
and shapes are the reference's, so its weights load, but they are not contiguous, and the
weights-changed set refused strided weights and was skipped."""

from pathlib import Path

import torch
import torch.nn as nn

from stitchcuda import runtime

_lib = runtime.load(Path(__file__).with_name("kernels.cpp"))


class ModelNew(nn.Module):
    def __init__(self, n: int):
        super().__init__()
        self.w1 = nn.Parameter((torch.randn(n, n) / n**0.5).t().contiguous().t())
        self.w2 = nn.Parameter((torch.randn(n, n) / n**0.5).t().contiguous().t())
        self.b = nn.Parameter(torch.randn(n) * 0.1)
        self._m: torch.Tensor | None = None

    def forward(self, x):
        x = x.contiguous()
        n = self.w1.shape[0]
        if self._m is None:
            self._m = torch.empty(n, n)
            _lib.call("tanh_gram", self.w1.detach().contiguous(), self.w2.detach().contiguous(), self._m, n)
        out = torch.empty(x.shape[0], n)
        _lib.call("matmul_bias", x, self._m, self.b.detach().contiguous(), out, x.shape[0], n)
        return out
