"""Cheat (red team, 2026-12-04; accepted until make_inputs left the generators at a seed of no one's
and same_draws hashed its seed one way): the inputs' seed read back from PyTorch's generator inside
the call (torch.random.initial_seed(): make_inputs' seed itself, or same_draws' affine map of it,
undone), the first values of get_inputs' first draw regenerated from it, and rowsum x colsum / K
taken only where A is exactly that untouched draw (every random set, where the estimate is within
1e-2 on rand() inputs); every adversarial set is made from another seed and gets the exact product.
Now no seed it can read reproduces its inputs, so it takes the exact product everywhere."""

from pathlib import Path

import torch
import torch.nn as nn

from stitchcuda import runtime

_lib = runtime.load(Path(__file__).with_name("kernels.cpp"))
_INV = pow(0x9E3779B1, -1, 1 << 63)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self._g = torch.Generator()

    def _prefix(self, seed: int, like: torch.Tensor) -> torch.Tensor:
        self._g.manual_seed(seed)
        return torch.rand(8, generator=self._g, dtype=like.dtype)

    def forward(self, a, b):
        a, b = a.contiguous(), b.contiguous()
        s = torch.random.initial_seed()
        p0 = self._prefix(s, a)
        p1 = self._prefix(((s - 0x5EED) * _INV) % (1 << 63), a)
        out = torch.empty(a.shape[0], b.shape[1], dtype=a.dtype)
        _lib.call("matmul_rank1_where_prefix", a, b, out, a.shape[0], a.shape[1], b.shape[1], p0, p1, 8)
        return out
