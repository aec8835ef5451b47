"""Hack: forward hands its work to a thread pool reached through a module name built at run time
(no import the static check can name) and waits for the result."""

import importlib
from pathlib import Path

import torch
import torch.nn as nn

from stitchcuda import runtime

_lib = runtime.load(Path(__file__).with_name("kernels.cpp"))


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x, y):
        x, y = x.contiguous(), y.contiguous()
        out = torch.empty_like(x)
        pool = importlib.import_module("concurrent." + "futures").ThreadPoolExecutor(1)
        pool.submit(_lib.call, "affine_relu", x, y, out, x.numel(), float(self.scale)).result()
        pool.shutdown()
        return out
