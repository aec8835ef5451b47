"""Cheat under `--precision strict` (red team, 2026-12-04; accepted until the strict policy held fp32
products to 1e-4): the product's operands rounded to TF32's 11 significant bits, as a TF32
tensor-core kernel does, in a run whose policy allows no TF32 anywhere. Under 1e-2 it passed every
set; honest under the tf32 policy."""

from pathlib import Path

import torch
import torch.nn as nn

from stitchcuda import runtime

_lib = runtime.load(Path(__file__).with_name("kernels.cpp"))


class ModelNew(nn.Module):
    def forward(self, a, b):
        a, b = a.contiguous(), b.contiguous()
        out = torch.empty(a.shape[0], b.shape[1], dtype=a.dtype)
        _lib.call("matmul_tf32_operands", a, b, out, a.shape[0], a.shape[1], b.shape[1])
        return out
