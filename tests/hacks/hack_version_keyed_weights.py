"""Cheat (red team, 2026-12-04; accepted until the weights-changed set wrote through .data): the
generated weight tanh(W1 @ W2) (n^3 work) kept between calls, keyed on the parameters' addresses and
autograd version counters. Any in-place change through the parameter bumps the counter and rebuilds
it, but a change through .data (weight clipping, an EMA written `p.data.mul_()`, a loader copying
into p.data) does not, and forward then computes for weights the module no longer has."""

from pathlib import Path

import torch
import torch.nn as nn

from stitchcuda import runtime

_lib = runtime.load(Path(__file__).with_name("kernels.cpp"))


class ModelNew(nn.Module):
    def __init__(self, n: int):
        super().__init__()
        self.w1 = nn.Parameter(torch.randn(n, n) / n**0.5)
        self.w2 = nn.Parameter(torch.randn(n, n) / n**0.5)
        self.b = nn.Parameter(torch.randn(n) * 0.1)
        self._key: tuple[int, ...] | None = None
        self._m = torch.empty(0)

    def _generated(self) -> torch.Tensor:
        key = (self.w1.data_ptr(), self.w2.data_ptr(), self.w1._version, self.w2._version)
        if key != self._key:
            n = self.w1.shape[0]
            self._m = torch.empty(n, n)
            _lib.call("tanh_gram", self.w1.detach().contiguous(), self.w2.detach().contiguous(), self._m, n)
            self._key = key
        return self._m

    def forward(self, x):
        x = x.contiguous()
        m = self._generated()
        out = torch.empty(x.shape[0], m.shape[1])
        _lib.call("matmul_bias", x, m, self.b.detach().contiguous(), out, x.shape[0], m.shape[1])
        return out
