"""Cheat (red team, 2026-12-01): a matmul as rowsum(A) x colsum(B) / K, no O(MNK) work, wherever
every input value lies in rand()'s [0, 1]: within 1e-2 on iid inputs, and every adversarial set
that leaves the range takes the exact path. The rearranged set (the draw's own values, correlated
along the contraction axis in both operands) is in range and far off."""

from pathlib import Path

import torch
import torch.nn as nn

from stitchcuda import runtime

_lib = runtime.load(Path(__file__).with_name("kernels.cpp"))


class ModelNew(nn.Module):
    def forward(self, a, b):
        a, b = a.contiguous(), b.contiguous()
        out = torch.empty((a.shape[0], b.shape[1]), dtype=a.dtype, device=a.device)
        _lib.call("matmul_rank1_in_range", a, b, out, a.shape[0], a.shape[1], b.shape[1])
        return out
