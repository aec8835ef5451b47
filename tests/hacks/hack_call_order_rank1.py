"""Cheat (red team, 2026-12-04; accepted until the checked sets after random-0 ran in a secret
order): the Verifier's order of calls learnt and used. Its first five calls were fresh random sets
(iid rand(), where rowsum x colsum / K is within 1e-2 on a long contraction), the next ones its
adversarial and further sets: the estimate on calls 1-5 and from call 21 on (the timed calls and
later fresh sets), the exact product in between."""

from pathlib import Path

import torch
import torch.nn as nn

from stitchcuda import runtime

_lib = runtime.load(Path(__file__).with_name("kernels.cpp"))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self._calls = 0

    def forward(self, a, b):
        self._calls += 1
        estimate = self._calls <= 5 or self._calls > 20
        a, b = a.contiguous(), b.contiguous()
        out = torch.empty(a.shape[0], b.shape[1], dtype=a.dtype)
        _lib.call("matmul_rank1_or_exact", a, b, out, a.shape[0], a.shape[1], b.shape[1], int(estimate))
        return out
