"""Cheat (red team, 2026-12-01): a cosine loss from 16 of every row's 4096 columns. Over iid inputs
each row's estimate is noisy, but the loss is a mean over 8192 rows and the noise averages out,
within tolerance on every iid set; a few elements far out of scale (sparse-spikes) do not correlate
the two inputs, so they move the estimate no more than the rest. What it misses are large lines the
inputs share (the shared-lines set)."""

from pathlib import Path

import torch
import torch.nn as nn

from stitchcuda import runtime

_lib = runtime.load(Path(__file__).with_name("kernels.cpp"))


class ModelNew(nn.Module):
    def forward(self, predictions, targets):
        p, t = predictions.contiguous(), targets.contiguous()
        out = torch.empty((), dtype=p.dtype, device=p.device)
        _lib.call("cosine_loss_every", p, t, out, p.shape[0], p.shape[1], 256)
        return out
