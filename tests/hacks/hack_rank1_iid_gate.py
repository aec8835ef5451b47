"""Cheat (red team, 2026-12-02; accepted until the coupled set): a matmul as rowsum(A) x colsum(B) / K
(no O(MNK) work) wherever both operands pass a one-pass test of looking like iid rand() draws: every value in [0, 1], mean and variance those of
U(0, 1) within 6 sigma, and the row means and column means no more dispersed than iid values make
them. hack_rank1_in_range tested the range alone and was caught by the rearranged set (the draw's
own values, in range, with row/column effects); that set's mean already leaves 6 sigma, and its
effects show in the dispersion. Every other adversarial set leaves the range or the moments.
Exact product elsewhere, so every per-input adversarial set is exact. The coupled set passes the
test (each operand alone an iid draw, in value and order) and is far off where B's columns follow
A's rows."""

from pathlib import Path

import torch
import torch.nn as nn

from stitchcuda import runtime

_lib = runtime.load(Path(__file__).with_name("kernels.cpp"))


class ModelNew(nn.Module):
    def forward(self, a, b):
        a, b = a.contiguous(), b.contiguous()
        out = torch.empty((a.shape[0], b.shape[1]), dtype=a.dtype, device=a.device)
        _lib.call("matmul_rank1_iid_gated", a, b, out, a.shape[0], a.shape[1], b.shape[1])
        return out
