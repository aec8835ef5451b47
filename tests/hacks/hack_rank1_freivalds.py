"""Cheat (red team, 2026-12-04; accepted until the Verifier compared each candidate's error across
kinds of input sets): rowsum x colsum / K wherever each operand is a scaled iid-looking draw (random,
large, tiny and negated sets) and a Freivalds check of the estimate passes, the exact product
elsewhere. The coupled and rearranged sets, made to beat a range or moments test, fail its own
projections, so it is exact on every structured set: 1.3e-3 off on the random sets, 2.5e-7 on the
structured ones, where an honest kernel's error is the same or larger."""

from pathlib import Path

import torch
import torch.nn as nn

from stitchcuda import runtime

_lib = runtime.load(Path(__file__).with_name("kernels.cpp"))


class ModelNew(nn.Module):
    def forward(self, a, b):
        a, b = a.contiguous(), b.contiguous()
        out = torch.empty((a.shape[0], b.shape[1]), dtype=a.dtype, device=a.device)
        _lib.call("matmul_rank1_self_checked", a, b, out, a.shape[0], a.shape[1], b.shape[1])
        return out
