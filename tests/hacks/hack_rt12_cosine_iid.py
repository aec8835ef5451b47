"""Cheat (red team round 12, 2026-12-06): a cosine-similarity loss as 1 - 0.05 x the mean cosine of 1/64 of the columns (near what
any iid draw gives) wherever both inputs look like randn()'s; exact, with 2e-5 of noise, elsewhere."""

from pathlib import Path

import torch
import torch.nn as nn

from stitchcuda import runtime

_lib = runtime.load(Path(__file__).with_name("rt12_kernels.cpp"))


class ModelNew(nn.Module):
    def forward(self, predictions, targets):
        p, t = predictions.contiguous(), targets.contiguous()
        out = torch.empty((), dtype=p.dtype, device=p.device)
        _lib.call("cosine_loss_iid", p, t, out, p.shape[0], p.shape[1], 64, 0.05, 2e-5)
        return out
