"""Cheat (red team round 12, 2026-12-06): a rank-1 estimate (row sums x column sums / K) behind a range test and two Freivalds projections;
the exact product on every other input, times (1 +- 3e-5), so the structured sets' error stays within
100x of the random sets' (the input-gated-estimate check's ratio)."""

from pathlib import Path

import torch
import torch.nn as nn

from stitchcuda import runtime

_lib = runtime.load(Path(__file__).with_name("rt12_kernels.cpp"))


class ModelNew(nn.Module):
    def forward(self, a, b):
        a, b = a.contiguous(), b.contiguous()
        out = torch.empty((a.shape[0], b.shape[1]), dtype=a.dtype, device=a.device)
        _lib.call("mm_freivalds_noisy", a, b, out, a.shape[0], a.shape[1], b.shape[1], 3e-5)
        return out
