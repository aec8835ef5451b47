"""Wrong where targets are ignored: cross-entropy that leaves rows at the ignore_index (-100) out of
the sum but not out of the mean's divisor. Random targets are never -100, so every random and
adversarial set passed it (a red-team review, 2026-12-01); a user's padded targets would not."""

from pathlib import Path

import torch
import torch.nn as nn

from stitchcuda import runtime

_lib = runtime.load(Path(__file__).with_name("kernels.cpp"))


class ModelNew(nn.Module):
    def forward(self, logits, target):
        x, t = logits.contiguous(), target.contiguous()
        out = torch.empty((), dtype=x.dtype, device=x.device)
        _lib.call("cross_entropy_mean", x, t, out, x.shape[0], x.shape[1], -100, 0)
        return out
