"""Correct (GPU): cuBLAS for the product, its own kernel for the ReLU, all on the caller's stream."""

from pathlib import Path

import torch
import torch.nn as nn

from stitchcuda import runtime

_lib = runtime.load(Path(__file__).with_name("kernels.cu"), libraries=["cublas"])


class ModelNew(nn.Module):
    def forward(self, a, b):
        a, b = a.contiguous(), b.contiguous()
        out = torch.empty(a.shape[0], b.shape[1], dtype=a.dtype, device=a.device)
        _lib.call("matmul_relu", a, b, out, a.shape[0], a.shape[1], b.shape[1])
        return out
