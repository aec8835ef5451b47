"""Cheat (red team round 14, 2026-12-07): a reference that draws random numbers (dropout) switched draw_tracking's
draws-not-followed off (worker.py: `if not draws_random(ref_ops)`). Round 13's Freivalds gate + rank-1
matmul (row sums x column sums / K, no O(MNK) product) on plain rand() draws; exact with 3e-5 noise on
the structured sets (so input-gated-estimate's 100x ratio is not reached). The mask drawn as eager
dropout draws it (the allowed native_dropout over ones). With the check on, a fresh mask a draw moved
the outputs so much more than the inputs did that the estimate's error went unseen: random sets now
draw one secret mask (worker._check_correctness)."""
from pathlib import Path

import torch
import torch.nn as nn

from stitchcuda import runtime

_lib = runtime.load(Path(__file__).with_name("rt13_kernels.cpp"))


class ModelNew(nn.Module):
    def __init__(self, p):
        super().__init__()
        self.p = p

    def forward(self, a, b):
        a, b = a.contiguous(), b.contiguous()
        c = torch.empty((a.shape[0], b.shape[1]), dtype=a.dtype, device=a.device)
        if self.training:
            mask = torch.ops.aten.native_dropout(torch.ones(c.shape, dtype=c.dtype, device=c.device), 0.1, True)[1]
            keep = 1.0 / (1.0 - 0.1)
        else:
            mask, keep = torch.ones(c.shape, dtype=torch.bool, device=c.device), 1.0
        _lib.call("mm_rank1_dropout", a, b, mask, c, a.shape[0], a.shape[1], b.shape[1], keep, 3e-5)
        return c
