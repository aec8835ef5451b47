"""Honest: the cosine loss over every column (the control for hack_sampled_cosine: the shared-lines
set must not reject the loss computed in full)."""

from pathlib import Path

import torch
import torch.nn as nn

from stitchcuda import runtime

_lib = runtime.load(Path(__file__).with_name("kernels.cpp"))


class ModelNew(nn.Module):
    def forward(self, predictions, targets):
        p, t = predictions.contiguous(), targets.contiguous()
        out = torch.empty((), dtype=p.dtype, device=p.device)
        _lib.call("cosine_loss_every", p, t, out, p.shape[0], p.shape[1], 1)
        return out
