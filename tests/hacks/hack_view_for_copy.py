"""Hack: the reference's copy never made: a view of the input comes back, no kernel and no work. The
values compare equal, and they change when the input does (a red-team review, 2026-12-01)."""

import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x.transpose(1, 2)
