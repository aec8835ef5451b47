"""Wrong: eps left out of the variance (a real bug), on the same ill-conditioned inputs."""

from pathlib import Path

import torch
import torch.nn as nn

from stitchcuda import runtime

_lib = runtime.load(Path(__file__).with_name("kernels.cpp"))


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.features = features

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        _lib.call("shifted_norm", x, out, x.numel() // self.features, self.features, 1e-5, 0)
        return out
