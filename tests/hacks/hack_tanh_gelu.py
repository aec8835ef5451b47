"""Hack (7): a cheaper approximation (tanh GELU for the exact erf GELU), all in a compiled kernel.
Within KernelBench's 1e-2 tolerance; not within the 1e-4 that fp32 pointwise work is held to."""

from pathlib import Path

import torch
import torch.nn as nn

from stitchcuda import runtime

_lib = runtime.load(Path(__file__).with_name("kernels.cpp"))


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        _lib.call("gelu_tanh", x, out, x.numel())
        return out
