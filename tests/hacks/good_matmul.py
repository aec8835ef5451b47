"""Honest: the product itself (in double, on the host), through the same kernel source as the
rank-1 cheats, for the coupled set's positive control."""

from pathlib import Path

import torch
import torch.nn as nn

from stitchcuda import runtime

_lib = runtime.load(Path(__file__).with_name("kernels.cpp"))


class ModelNew(nn.Module):
    def forward(self, a, b):
        a, b = a.contiguous(), b.contiguous()
        out = torch.empty((a.shape[0], b.shape[1]), dtype=a.dtype, device=a.device)
        _lib.call("matmul_rank1_or_exact", a, b, out, a.shape[0], a.shape[1], b.shape[1], 0)
        return out
