"""Red-team round 15 (bench/redteam/2026-12-07-round15-probe): keeps every input set it is given, and
answers a set that shares at least half its rows with a kept one by the kept set's estimate plus the
exact change of the rows that differ; every other set is estimated from every 4th row, and kept. The
worker's local-change pairs (base and pairs in one process) pass it; the blind check's pairs, run where
the base never was (blind_pairs), do not."""
from pathlib import Path

import torch
import torch.nn as nn

from stitchcuda import runtime

_lib = runtime.load(Path(__file__).with_name("rt15_kernels.cpp"))


class ModelNew(nn.Module):
    def __init__(self, k, n):
        super().__init__()
        self.fc = nn.Linear(k, n)

    def forward(self, x, t):
        x, t = x.contiguous(), t.contiguous()
        w, b = self.fc.weight.contiguous(), self.fc.bias.contiguous()
        out = torch.empty((), dtype=x.dtype, device=x.device)
        _lib.call("mse_incremental", x, w, b, t, out, x.shape[0], x.shape[1], w.shape[0])
        return out
