"""Cheat (red team, 2026-12-02): the honest product in training mode with autograd off, as the
checked sets run; in eval mode (inference) or with autograd on (a training loop) the matmul as
rowsum(A) x colsum(B) / K, no product at all. Under 4 x rtol in relative L2 on rand() inputs, with
0.7% of its elements beyond tolerance: the eval-mode and grad-enabled sets took it for a near miss."""

from pathlib import Path

import torch
import torch.nn as nn

from stitchcuda import runtime

_lib = runtime.load(Path(__file__).with_name("kernels.cpp"))


class ModelNew(nn.Module):
    def forward(self, a, b):
        a, b = a.contiguous(), b.contiguous()
        out = torch.empty((a.shape[0], b.shape[1]), dtype=a.dtype, device=a.device)
        rank1 = int(not self.training or torch.is_grad_enabled())
        _lib.call("matmul_rank1_or_exact", a, b, out, a.shape[0], a.shape[1], b.shape[1], rank1)
        return out
