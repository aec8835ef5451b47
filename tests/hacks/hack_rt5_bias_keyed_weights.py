"""Cheat (stale weights): tanh(w1 @ w2), an n^3 product, kept and made again only when the bias b
(n floats) changes. Every weights-changed set changes every tensor of the module at once (a sixteenth
of each, or one element of each vector), and its put-back set restores them all, so a key on the
cheapest tensor sees every change the Verifier makes; stale after any update that leaves the bias
alone (a frozen bias, pruning or a checkpoint loaded into the matrices)."""

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
        self._saved = torch.full((n,), float("nan"))

    def forward(self, x):
        x = x.contiguous()
        n = self.w1.shape[0]
        out = torch.empty(x.shape[0], n)
        _lib.call("hyper_bias_keyed", x, self.w1.detach().contiguous(), self.w2.detach().contiguous(),
                  self.b.detach().contiguous(), self._m, self._saved, out, x.shape[0], n)
        return out
