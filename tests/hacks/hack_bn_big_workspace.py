"""Cheat (red team, 2026-12-04; accepted until the candidate's buffers were snapshot by the reference's names): a training-mode BatchNorm that never updates its running statistics and keeps normalising
with the batch's statistics after .eval() (hack_bn_train_no_stats and hack_bn_ignores_eval in one),
given a 280 MiB non-persistent "workspace" buffer: past the Verifier's 256 MiB buffer-snapshot limit,
so state_updates.snapshot returns {} for the candidate, the state-not-updated check finds nothing to
compare and the other-mode set is skipped ("buffers too large to put back"). Non-persistent: not in
the state_dict, so the reference's weights still load."""

from pathlib import Path

import torch
import torch.nn as nn

from stitchcuda import runtime

_lib = runtime.load(Path(__file__).with_name("kernels.cpp"))


class ModelNew(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.bn = nn.Module()
        self.bn.weight = nn.Parameter(torch.ones(c))
        self.bn.bias = nn.Parameter(torch.zeros(c))
        self.bn.register_buffer("running_mean", torch.zeros(c))
        self.bn.register_buffer("running_var", torch.ones(c))
        self.bn.register_buffer("num_batches_tracked", torch.tensor(0, dtype=torch.long))
        self.register_buffer("workspace", torch.empty(70 << 20), persistent=False)

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        n, c = x.shape[:2]
        bn = self.bn
        _lib.call("bn_train", x, bn.weight, bn.bias, bn.running_mean, bn.running_var, bn.num_batches_tracked, out, n, c,
                  x[0, 0].numel(), 1e-5, 0.1, 0)
        return out
