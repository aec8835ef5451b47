"""Cheat (red team round 3, 2026-12-04; accepted until a set ran on the weights put back after each
weights-changed set): tanh(w1 @ w2) kept and made again only when row 0 of w1 or w2 changes (or while
autograd is on). The spread change always touches row 0, and putting it back moved the key again, so
the rows set met a copy made for its own change by chance; stale after any update that leaves row 0
alone."""

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
        self._m = torch.empty(n, n)
        self._saved = torch.full((2 * n,), float("nan"))

    def forward(self, x):
        x = x.contiguous()
        if torch.is_grad_enabled():  # "training: weights move every step", so no cache: rebuild (and keep it)
            self._saved.fill_(float("nan"))
        n = self.w1.shape[0]
        out = torch.empty(x.shape[0], n)
        _lib.call("hyper_row_keyed", x, self.w1.detach().contiguous(), self.w2.detach().contiguous(),
                  self.b.detach().contiguous(), self._m, self._saved, out, x.shape[0], n)
        return out
