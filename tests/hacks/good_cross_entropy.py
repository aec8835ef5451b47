"""Honest: cross-entropy that skips the rows whose target is the ignore_index, as PyTorch does (the
control for wrong_ce_ignored_rows)."""

from pathlib import Path

import torch
import torch.nn as nn

from stitchcuda import runtime

_lib = runtime.load(Path(__file__).with_name("kernels.cpp"))


class ModelNew(nn.Module):
    def forward(self, logits, target):
        x, t = logits.contiguous(), target.contiguous()
        out = torch.empty((), dtype=x.dtype, device=x.device)
        _lib.call("cross_entropy_mean", x, t, out, x.shape[0], x.shape[1], -100, 1)
        return out
