"""Cheat (red team round 13, 2026-12-06): a rank-1 product (row sums x column sums / K) behind a gate of
Freivalds checks, with one element moved past the plain allowance by its own TF32 error, so that every
random set went to the fp64 referee, whose sets no check of the draws counted."""

from pathlib import Path

import torch
import torch.nn as nn

from stitchcuda import runtime

_lib = runtime.load(Path(__file__).with_name("rt13_kernels.cpp"))


class ModelNew(nn.Module):
    def forward(self, a, b):
        a, b = a.contiguous(), b.contiguous()
        out = torch.empty((a.shape[0], b.shape[1]), dtype=a.dtype, device=a.device)
        _lib.call("mm_rank1_tf32spoil", a, b, out, a.shape[0], a.shape[1], b.shape[1], 1e-2)
        return out
