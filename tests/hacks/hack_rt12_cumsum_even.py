"""Cheat (red team round 12, 2026-12-06): cumsum reading only the even elements (each odd one taken equal to the one before it)
wherever they look like rand()'s; exact, with 1e-4 of noise, elsewhere. cumsum was judged at 1e-2 then."""

from pathlib import Path

import torch
import torch.nn as nn

from stitchcuda import runtime

_lib = runtime.load(Path(__file__).with_name("rt12_kernels.cpp"))


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        _lib.call("cumsum_rows_even", x, out, x.shape[0], x.shape[1], 1e-4)
        return out
