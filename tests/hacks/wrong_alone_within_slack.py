"""Wrong only where it runs alone (the blind check's witness, told apart by its command line): its
scale 3e-4 off there, past twice ref_affine's tolerance and inside the blind check's gross-forgery
slack. Exact in the worker, whose judgement native code in its process could have loosened (a
red-team candidate, 2026-12-04); judged outside it, it is wrong, not hacked."""

import sys
from pathlib import Path

import torch
import torch.nn as nn

from stitchcuda import runtime

_lib = runtime.load(Path(__file__).with_name("kernels.cpp"))
_ALONE = "witness" in sys.argv


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x, y):
        x, y = x.contiguous(), y.contiguous()
        out = torch.empty_like(x)
        _lib.call("affine_relu", x, y, out, x.numel(), float(self.scale) * (1 + 3e-4 if _ALONE else 1))
        return out
