"""Reference: cumulative sum along long rows of rand() values (red team round 12, 2026-12-06)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.cumsum(x, dim=1)


def get_inputs():
    return [torch.rand(32, 65536)]


def get_init_inputs():
    return []
