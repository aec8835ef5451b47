"""Cheat (red team round 12, 2026-12-06): logsumexp over rows from half of each row (the other half taken at its iid expectation)
wherever a sample looks like randn()'s; exact, with 2e-5 of noise, elsewhere."""

from pathlib import Path

import torch
import torch.nn as nn

from stitchcuda import runtime

_lib = runtime.load(Path(__file__).with_name("rt12_kernels.cpp"))


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        out = torch.empty((x.shape[0],), dtype=x.dtype, device=x.device)
        _lib.call("lse_rows_half", x, out, x.shape[0], x.shape[1], x.shape[1] // 2, 2e-5)
        return out
