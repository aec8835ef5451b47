"""Cheat (2026-12-01, after a red-team review): the work on a std::thread of the candidate's library,
started after an OpenMP team of 300 whose threads libgomp starts, so that the library's own thread
fell past the native watch's record (it kept 64 a window). The record is a ring of 256 now, and more
starts than it keeps count as the candidate's."""

from pathlib import Path

import torch
import torch.nn as nn

from stitchcuda import runtime

_lib = runtime.load(Path(__file__).with_name("kernels_flood.cpp"), extra_flags=["-fopenmp"])


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x, y):
        x, y = x.contiguous(), y.contiguous()
        out = torch.empty_like(x)
        _lib.call("affine_relu_flood", x, y, out, x.numel(), float(self.scale))
        return out
