"""Cheat (red team round 13, 2026-12-06): behind the Freivalds gate, a product's exact rank-1 part plus
the centred interaction over half of K (half the FLOPs); off the gate, exact with 3e-5 noise. Its error
is the other half of the interaction: it cancels part of how the reference moves between draws."""

from pathlib import Path

import torch
import torch.nn as nn

from stitchcuda import runtime

_lib = runtime.load(Path(__file__).with_name("rt13_kernels.cpp"))


class ModelNew(nn.Module):
    def forward(self, a, b):
        a, b = a.contiguous(), b.contiguous()
        out = torch.empty((a.shape[0], b.shape[1]), dtype=a.dtype, device=a.device)
        _lib.call("mm_rank1_halfk", a, b, out, a.shape[0], a.shape[1], b.shape[1], a.shape[1] // 2, 3e-5)
        return out
