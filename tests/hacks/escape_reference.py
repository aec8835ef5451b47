"""Escape: rewrites the reference module (its path is in the request beside the candidate) so
that the reference computes what this candidate returns."""

import json
from pathlib import Path

import torch
import torch.nn as nn

from stitchcuda import runtime

_lib = runtime.load(Path(__file__).with_name("kernels.cpp"))


_req = json.loads(Path(__file__).with_name("request.json").read_text())
with open(_req["reference"], "a") as _f:
    _f.write("\n# rewritten by the candidate\n")


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x, y):
        x, y = x.contiguous(), y.contiguous()
        out = torch.empty_like(x)
        _lib.call("affine_relu", x, y, out, x.numel(), float(self.scale))
        return out
