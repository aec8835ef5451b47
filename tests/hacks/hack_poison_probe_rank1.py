"""Cheat (red team, 2026-12-04; accepted until a secret half of the checked sets, and the call after
timing, ran without poisoned allocations): a checked call told from any other by the Verifier's NaN
poisoning (deterministic mode fills torch.empty's memory with NaN): a scratch "workspace" is
allocated and looked at in the kernel. Poisoned calls compute the product; the others (the timed
calls, the blind check's witness, judged at 10 x) return rowsum x colsum / K."""

from pathlib import Path

import torch
import torch.nn as nn

from stitchcuda import runtime

_lib = runtime.load(Path(__file__).with_name("kernels.cpp"))


class ModelNew(nn.Module):
    def forward(self, a, b):
        a, b = a.contiguous(), b.contiguous()
        scratch = torch.empty(16, dtype=torch.float32, device=a.device)  # the kernel's workspace
        out = torch.empty(a.shape[0], b.shape[1], dtype=a.dtype)
        _lib.call("matmul_exact_while_poisoned", a, b, out, a.shape[0], a.shape[1], b.shape[1], scratch, 16)
        return out
